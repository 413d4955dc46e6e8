"""`pykraft dev` end to end: up, status, kill and start a broker, down, as a user would run them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykraft.cli.dev import cluster as dev_cluster
from pykraft.cli.dev import processes as dev_processes
from tests.ports import free_port

from .controllers import PYKRAFT
from .processes import wait_for

pytestmark = pytest.mark.integration

COMMAND_TIMEOUT_S = 90
BASE_PORT_ATTEMPTS = 20
# A controller listens within a few seconds of its start; the old start waited 60 s for a quorum.
FIRST_CONTROLLER_START_S_MAX = 20


def pykraft(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [PYKRAFT, *args], input=stdin, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S
    )
    assert result.returncode == 0, f"pykraft {' '.join(args)}: {result.stderr}"
    return result


def dev(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [PYKRAFT, "dev", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    assert result.returncode == 0, f"dev {' '.join(args)}: {result.stderr}"
    return result


def free_base_port(data_dir: Path) -> int:
    """A base port whose whole layout (3 controllers, 1 broker) is free."""
    for _ in range(BASE_PORT_ATTEMPTS):
        base = free_port()
        layout = dev_cluster.plan_cluster(3, 1, data_dir, base_port=base)
        if not dev_cluster.taken_ports(layout):
            return base
    raise AssertionError("no free range of ports for a dev cluster")


def status(data_dir: Path) -> dict[str, Any]:
    raw = json.loads(dev("status", "--output", "json", data_dir=data_dir).stdout)
    assert isinstance(raw, dict)
    return raw


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """The cluster's directory; whatever is left running at the end is killed."""
    yield tmp_path
    if dev_cluster.cluster_file(tmp_path).exists():
        for node in dev_cluster.load(tmp_path).nodes:
            if dev_processes.is_running(node) and node.pid is not None:
                os.killpg(node.pid, signal.SIGKILL)


def test_up_status_kill_start_down(data_dir: Path) -> None:
    base = free_base_port(data_dir)
    dev("up", "--controllers", "3", "--brokers", "1", "--base-port", str(base), data_dir=data_dir)

    raw = json.loads((data_dir / "cluster.json").read_text())
    assert [n["name"] for n in raw["nodes"]] == [
        "controller-1", "controller-2", "controller-3", "broker-1",
    ]  # fmt: skip
    assert raw["bootstrap_servers"] == f"127.0.0.1:{base + 201}"
    assert raw["nodes"][0]["address"] == f"127.0.0.1:{base + 1}"
    cluster = dev_cluster.load(data_dir)
    assert all(dev_processes.is_running(n) for n in cluster.nodes)

    shown = status(data_dir)
    assert shown["leader_id"] in (1, 2, 3)
    assert all(n["alive"] for n in shown["nodes"])
    assert shown["nodes"][3]["state"] == "unfenced"
    check_metrics_endpoints(raw, base)

    broker = cluster.node("broker-1")
    dev("kill", "broker-1", data_dir=data_dir)
    assert not dev_processes.is_running(broker)
    dev("start", "broker-1", data_dir=data_dir)
    restarted = dev_cluster.load(data_dir).node("broker-1")
    assert restarted.pid != broker.pid and dev_processes.is_running(restarted)
    assert status(data_dir)["nodes"][3] | {"pid": None} == {
        "name": "broker-1", "role": "broker", "id": 1, "address": broker.address,
        "pid": None, "alive": True, "state": "unfenced",
    }  # fmt: skip

    dev("down", data_dir=data_dir)
    final = dev_cluster.load(data_dir)
    assert not any(dev_processes.is_running(n) for n in final.nodes)


def check_metrics_endpoints(raw: dict[str, Any], base: int) -> None:
    """Every node of cluster.json serves /ready and /metrics at its metrics_address (controllers
    at P+401.., brokers at P+501..); once ready, the broker's reports itself RUNNING."""
    addresses = {n["name"]: n["metrics_address"] for n in raw["nodes"]}
    assert addresses["controller-2"] == f"127.0.0.1:{base + 402}"
    assert addresses["broker-1"] == f"127.0.0.1:{base + 501}"

    def all_ready() -> bool:
        for address in addresses.values():
            try:
                urllib.request.urlopen(f"http://{address}/ready", timeout=5).close()
            except urllib.error.HTTPError:  # 503: not yet
                return False
        return True

    wait_for(all_ready, timeout_s=20, what="every node's /ready answering 200")
    url = f"http://{addresses['broker-1']}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        assert "kafka_server_kafkaserver_brokerstate 3.0" in response.read().decode().splitlines()


def test_full_restart_node_by_node(data_dir: Path) -> None:
    """The README's full restart: every node stopped, then started one command at a time. The
    first controller cannot have a quorum yet, so its start returns once it listens and says how
    many more voters the quorum waits for instead of waiting for a quorum that cannot exist;
    the record produced before the restart is read after it."""
    base = free_base_port(data_dir)
    dev("up", "--controllers", "3", "--brokers", "1", "--base-port", str(base), data_dir=data_dir)
    cluster = dev_cluster.load(data_dir)
    controllers, brokers = cluster.bootstrap_controllers, cluster.bootstrap_servers
    pykraft(
        "topics", "create", "--topic", "kept", "--partitions", "1", "--replication-factor", "1",
        "--bootstrap-controller", controllers,
    )  # fmt: skip
    pykraft(
        "produce", "--topic", "kept", "--acks", "all", "--bootstrap-server", brokers,
        stdin="before the restart\n",
    )  # fmt: skip
    dev("down", data_dir=data_dir)

    started = time.monotonic()
    first = dev("start", "controller-1", "--timeout-s", "60", data_dir=data_dir)
    assert time.monotonic() - started < FIRST_CONTROLLER_START_S_MAX, first.stdout
    assert "the quorum waits for 1 more voter of 3" in first.stdout
    second = dev("start", "controller-2", data_dir=data_dir)
    assert "waits for" not in second.stdout
    dev("start", "controller-3", data_dir=data_dir)
    dev("start", "broker-1", data_dir=data_dir)

    shown = status(data_dir)
    assert shown["leader_id"] in (1, 2, 3) and all(n["alive"] for n in shown["nodes"])
    consumed = pykraft(
        "consume", "--topic", "kept", "--from-beginning", "--max-messages", "1",
        "--timeout-ms", "20000", "--bootstrap-server", brokers,
    )  # fmt: skip
    assert consumed.stdout == "before the restart\n"
