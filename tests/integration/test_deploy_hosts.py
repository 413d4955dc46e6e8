"""The three-host example (deploy/hosts/host-N) on three hosts: each host a network namespace of
its own with its own address on a bridge the test makes, where the names pykraft-1..3 resolve
as DNS would resolve them. Each host runs its controller and broker from the example configs
unchanged but for the data directories; the brokers bind 0.0.0.0 and advertise their host's
name. A client on a fourth host produces and consumes through the advertised names; a host's
nodes are killed with SIGKILL, and every acknowledged record is read back.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import netns
from tests.integration.processes import BrokerProcess, ControllerProcess, NodeProcess, wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ROOT / "deploy" / "hosts"
HOST_IDS = (1, 2, 3)
NAMES = {f"pykraft-{i}": f"h{i}" for i in HOST_IDS}
CONTROLLERS = ",".join(f"pykraft-{i}:9091" for i in HOST_IDS)
BROKERS = ",".join(f"pykraft-{i}:9292" for i in HOST_IDS)
TOPIC, PARTITIONS = "orders", 3
RECORDS_PER_PHASE = 50
COMMAND_TIMEOUT_S = 150
READY_TIMEOUT_S = 60
FENCED_TIMEOUT_S = 40


@pytest.fixture
def network() -> Iterator[netns.TestNetwork]:
    reason = netns.unavailable_reason()
    if reason is not None:
        pytest.skip(f"network namespaces unavailable: {reason}")
    network = netns.TestNetwork([*NAMES.values(), "client"], prefix="pkd-", subnet="10.78.0")
    network.create()
    network.resolve(NAMES)
    yield network
    network.destroy()


@pytest.fixture
def hosts(network: netns.TestNetwork, tmp_path: Path) -> Iterator[dict[int, list[NodeProcess]]]:
    """Host id -> its controller and broker, started from the example configs."""
    nodes: dict[int, list[NodeProcess]] = {}
    for i in HOST_IDS:
        host, launcher = f"h{i}", network.launcher(f"h{i}")
        address = network.addresses[host]
        controller = ControllerProcess(
            node_id=i, data_dir=tmp_path / f"controller-{i}", log_path=tmp_path / f"c{i}.log",
            args=["--config", str(HOSTS / f"host-{i}" / "controller.toml"),
                  "--data-dir", str(tmp_path / f"controller-{i}")],
            grpc_port=9091, raft_port=9093, host=address, launcher=launcher,
        )  # fmt: skip
        broker = BrokerProcess(
            node_id=i, data_dir=tmp_path / f"broker-{i}", log_path=tmp_path / f"b{i}.log",
            args=["--config", str(HOSTS / f"host-{i}" / "broker.toml"),
                  "--log-dirs", str(tmp_path / f"broker-{i}")],
            port=9292, host=address, launcher=launcher,
        )  # fmt: skip
        nodes[i] = [controller, broker]
    try:
        for node in (n for pair in nodes.values() for n in pair):
            node.start()
        yield nodes
    finally:
        for node in (n for pair in nodes.values() for n in pair):
            node.kill()


def client(network: netns.TestNetwork, *args: str, stdin: str | None = None) -> str:
    """`pykraft ARGS` on the client host; its output (the test fails on a non-zero exit)."""
    command = [*network.launcher("client"), str(Path(sys.executable).parent / "pykraft"), *args]
    done = subprocess.run(
        command, input=stdin, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S
    )
    assert done.returncode == 0, f"pykraft {' '.join(args)}: {done.stderr}"
    return done.stdout


def broker_states(network: netns.TestNetwork) -> dict[str, str]:
    """Each registered broker's advertised address -> its state, as the controllers tell."""
    args = ("cluster", "describe", "--output", "json", "--bootstrap-controller", CONTROLLERS)
    described = json.loads(client(network, *args))
    return {b["address"]: b["state"] for b in described["brokers"]}


def produce(network: netns.TestNetwork, phase: str) -> list[str]:
    """Produces RECORDS_PER_PHASE records with acks=all; the records, all acknowledged."""
    records = [f"{phase}-{n}" for n in range(RECORDS_PER_PHASE)]
    client(network, "produce", "--topic", TOPIC, "--acks", "all", "--bootstrap-server", BROKERS,
           stdin="\n".join(records) + "\n")  # fmt: skip
    return records


def test_three_hosts_lose_nothing_when_a_host_dies(
    network: netns.TestNetwork, hosts: dict[int, list[NodeProcess]]
) -> None:
    advertised = {f"pykraft-{i}:9292" for i in HOST_IDS}
    wait_for(
        lambda: broker_states(network) == dict.fromkeys(advertised, "unfenced"),
        timeout_s=READY_TIMEOUT_S,
        what="three brokers registered under their hosts' names and unfenced",
    )
    client(network, "topics", "create", "--topic", TOPIC, "--partitions", str(PARTITIONS),
           "--replication-factor", "3", "--config", "min.insync.replicas=2",
           "--bootstrap-controller", CONTROLLERS)  # fmt: skip
    acknowledged = produce(network, "before")

    for node in hosts[1]:
        node.kill()
    wait_for(
        lambda: broker_states(network).get("pykraft-1:9292") == "fenced",
        timeout_s=FENCED_TIMEOUT_S,
        what="host 1's broker fenced",
    )
    acknowledged += produce(network, "after")

    consumed = client(network, "consume", "--topic", TOPIC, "--from-beginning",
                      "--max-messages", str(len(acknowledged)), "--timeout-ms", "30000",
                      "--bootstrap-server", BROKERS)  # fmt: skip
    assert sorted(consumed.splitlines()) == sorted(acknowledged)
