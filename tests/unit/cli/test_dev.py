"""`pykraft dev` without a cluster: port layout, cluster.json, argument errors, and the process
bookkeeping (pid checks, SIGTERM then SIGKILL) on stand-in processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pykraft.cli import main
from pykraft.cli.dev import cluster as dev_cluster
from pykraft.cli.dev import processes as dev_processes
from pykraft.cli.dev.cluster import DevCluster, DevClusterError, Node, plan_cluster
from pykraft.cli.dev.commands import Status, cluster_status


def run(*args: str) -> Result:
    return CliRunner().invoke(main.cli, ["dev", *args])


def test_ports_follow_the_base_port(tmp_path: Path) -> None:
    cluster = plan_cluster(3, 2, tmp_path, base_port=30000)
    assert [n.name for n in cluster.nodes] == [
        "controller-1", "controller-2", "controller-3", "broker-1", "broker-2",
    ]  # fmt: skip
    assert cluster.bootstrap_controllers == "127.0.0.1:30001,127.0.0.1:30002,127.0.0.1:30003"
    assert cluster.bootstrap_servers == "127.0.0.1:30201,127.0.0.1:30202"
    assert [n.ports for n in cluster.by_role("controller")] == [
        [30001, 30401, 30101], [30002, 30402, 30102], [30003, 30403, 30103],
    ]  # fmt: skip
    assert [n.ports for n in cluster.by_role("broker")] == [
        [30201, 30501, 30301], [30202, 30502, 30302],
    ]  # fmt: skip
    assert cluster.node("controller-2").metrics_address == "127.0.0.1:30402"
    assert cluster.node("broker-1").metrics_address == "127.0.0.1:30501"
    assert cluster.kafka_bootstrap_servers == "127.0.0.1:30301,127.0.0.1:30302"
    assert cluster.node("broker-1").kafka_address == "127.0.0.1:30301"
    assert cluster.node("controller-1").kafka_address is None


def test_node_arguments_name_its_data_and_peers(tmp_path: Path) -> None:
    cluster = plan_cluster(3, 1, tmp_path, base_port=30000, cluster_id="c1")
    controller, broker = cluster.node("controller-2"), cluster.node("broker-1")
    assert controller.data_dir == str(tmp_path.resolve() / "controller-2")
    assert controller.args[:2] == ("controller", "run")
    assert "1@127.0.0.1:30101,2@127.0.0.1:30102,3@127.0.0.1:30103" in controller.args
    assert broker.args[:2] == ("broker", "run")
    assert cluster.bootstrap_controllers in broker.args
    assert ("--cluster-id", "c1") == broker.args[-2:] == controller.args[-2:]
    assert broker.log_path == tmp_path.resolve() / "broker-1.log"


@pytest.mark.parametrize(
    ("controllers", "brokers", "base_port", "message"),
    [
        (2, 1, 9090, "controllers must be odd"),
        (0, 1, 9090, "controllers must be odd"),
        (3, 0, 9090, "brokers must be 1 to 99"),
        (3, 1, 80, "base port must be"),
        (3, 1, 65500, "base port must be"),
        (3, 1, 65535 - 501 - 98, "base port must be"),
    ],
)
def test_impossible_layouts_are_refused(
    tmp_path: Path, controllers: int, brokers: int, base_port: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        plan_cluster(controllers, brokers, tmp_path, base_port=base_port)


def test_cluster_json_round_trips(tmp_path: Path) -> None:
    cluster = plan_cluster(1, 2, tmp_path, base_port=30000)
    cluster = cluster.with_node(replace(cluster.node("broker-2"), pid=4242))
    dev_cluster.save(cluster, tmp_path)
    raw = json.loads((tmp_path / "cluster.json").read_text())
    assert raw["bootstrap_servers"] == "127.0.0.1:30201,127.0.0.1:30202"
    assert raw["bootstrap_controllers"] == "127.0.0.1:30001"
    assert raw["kafka_bootstrap_servers"] == "127.0.0.1:30301,127.0.0.1:30302"
    assert raw["nodes"][2] == {
        "name": "broker-2",
        "role": "broker",
        "id": 2,
        "address": "127.0.0.1:30202",
        "metrics_address": "127.0.0.1:30502",
        "pid": 4242,
        "data_dir": str(tmp_path.resolve() / "broker-2"),
        "args": list(cluster.node("broker-2").args),
    }
    assert dev_cluster.load(tmp_path) == cluster


def test_a_node_planned_before_metrics_has_no_metrics_address(tmp_path: Path) -> None:
    broker = plan_cluster(1, 1, tmp_path, base_port=30000).node("broker-1")
    flag = broker.args.index("--metrics-listen")
    older = replace(broker, args=broker.args[:flag] + broker.args[flag + 2 :])
    assert older.metrics_address is None
    assert older.ports == [30201, 30301]
    assert older.to_json()["metrics_address"] is None


def test_missing_or_damaged_cluster_json_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DevClusterError, match="no cluster in"):
        dev_cluster.load(tmp_path)
    (tmp_path / "cluster.json").write_text('{"nodes": [{"name": "x"}]}')
    with pytest.raises(DevClusterError, match="is damaged"):
        dev_cluster.load(tmp_path)


def test_unknown_node_lists_the_names(tmp_path: Path) -> None:
    dev_cluster.save(plan_cluster(1, 1, tmp_path), tmp_path)
    result = run("kill", "broker-9", "--data-dir", str(tmp_path))
    assert result.exit_code == 1
    assert "no node 'broker-9' in this cluster (nodes: controller-1, broker-1)" in result.stderr


def test_bad_counts_are_usage_errors(tmp_path: Path) -> None:
    result = run("up", "--controllers", "2", "--data-dir", str(tmp_path))
    assert result.exit_code == 2
    assert "controllers must be odd" in result.stderr
    assert not (tmp_path / "cluster.json").exists()


def test_commands_without_a_cluster_fail_clearly(tmp_path: Path) -> None:
    for command in ("status", "down"):
        result = run(command, "--data-dir", str(tmp_path))
        assert result.exit_code == 1
        assert f"Error: no cluster in {tmp_path}" in result.stderr


def test_a_taken_port_refuses_to_start(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        if taken - dev_cluster.BROKER_OFFSET < 1024:
            pytest.skip("the kernel handed out a port too low to be a broker's")
        result = run(
            "up", "--controllers", "1", "--brokers", "1", "--data-dir", str(tmp_path),
            "--base-port", str(taken - dev_cluster.BROKER_OFFSET),
        )  # fmt: skip
    assert result.exit_code == 1
    assert f"ports already in use: {taken}; pick another --base-port" in result.stderr
    assert not (tmp_path / "cluster.json").exists()


def test_status_lines_show_leader_and_brokers(tmp_path: Path) -> None:
    cluster = plan_cluster(3, 2, tmp_path)
    alive = [True, True, False, True, True]
    status = Status(list(zip(cluster.nodes, alive, strict=True)), 2, {1: "unfenced", 2: "fenced"})
    assert status.summary() == ("leader controller-2 | brokers unfenced 1/2 | processes alive 4/5")
    lines = status.table().splitlines()
    assert lines[0] == "quorum leader: controller-2"
    assert lines[3].split()[-2:] == ["alive", "leader"]
    assert lines[4].split()[-1] == "dead"
    assert lines[6].split()[-2:] == ["alive", "fenced"]
    assert [n["alive"] for n in status.to_json()["nodes"]] == alive


# --- process bookkeeping, on stand-in processes (python sleeping, named like a node) ---

_IGNORE_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN)"
_SLEEP = "print('ready', flush=True); time.sleep(60)"


@pytest.fixture
def stand_ins() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        process.kill()
        process.communicate(timeout=10)  # reaps it and closes its pipe


def stand_in(started: list[subprocess.Popen[str]], data_dir: Path, code: str) -> Node:
    """A process whose command line names `data_dir`, as a node's does, in its own group."""
    process = subprocess.Popen(
        [sys.executable, "-c", f"{code}; {_SLEEP}", str(data_dir)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started.append(process)
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    return Node("broker-1", "broker", 1, "127.0.0.1:1", str(data_dir), (), pid=process.pid)


def test_a_pid_counts_only_while_it_runs_the_node(
    tmp_path: Path, stand_ins: list[subprocess.Popen[str]]
) -> None:
    node = stand_in(stand_ins, tmp_path / "broker-1", "import time")
    assert dev_processes.is_running(node)
    assert not dev_processes.is_running(replace(node, data_dir=str(tmp_path / "other")))
    assert not dev_processes.is_running(replace(node, pid=None))
    dev_processes.kill_node(node)  # the killed child stays a zombie until reaped: not running
    assert not dev_processes.is_running(node)
    with pytest.raises(DevClusterError, match="broker-1 is not running"):
        dev_processes.kill_node(node)


def test_stop_escalates_to_sigkill(tmp_path: Path, stand_ins: list[subprocess.Popen[str]]) -> None:
    polite = stand_in(stand_ins, tmp_path / "a", "import time")
    stubborn = replace(stand_in(stand_ins, tmp_path / "b", _IGNORE_TERM), name="broker-2")
    assert dev_processes.stop_nodes([polite, stubborn], timeout_s=0.5) == [stubborn]
    assert stand_ins[0].wait(timeout=10) == -signal.SIGTERM
    assert stand_ins[1].wait(timeout=10) == -signal.SIGKILL


def test_an_unreachable_cluster_has_no_leader(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    controller = Node("controller-1", "controller", 1, f"127.0.0.1:{closed}", "d", ())
    status = cluster_status(DevCluster((controller,)))
    assert (status.leader_id, status.broker_states, status.nodes) == (
        None,
        {},
        [(controller, False)],
    )


def test_a_node_that_died_is_reported_with_how_it_ended(
    tmp_path: Path, stand_ins: list[subprocess.Popen[str]]
) -> None:
    """A node killed by a signal leaves nothing in its log; the launcher says which signal."""
    node = stand_in(stand_ins, tmp_path / "broker-1", "import time")
    os.kill(node.pid or 0, signal.SIGSEGV)
    assert dev_processes.wait_until(lambda: not dev_processes.is_running(node), 10)
    with pytest.raises(DevClusterError, match=r"broker-1 exited \(killed by SIGSEGV\); see "):
        dev_processes.wait_ready(DevCluster((node,)), [node], {}, timeout_s=10)
