"""The layout of a local development cluster (`pykraft dev`) and its file, DIR/cluster.json.

`plan_cluster` lays out names, ids, ports, data directories and the exact `pykraft` arguments of
every node; `DevCluster` round-trips through cluster.json, which is all that later commands
(`status`, `down`, `kill`, `stop`, `start`) need. Ports come from one base port P: controllers'
gRPC at P+1.., their Raft listeners at P+101.., brokers at P+201.., the brokers' Kafka protocol
listeners at P+301.., controllers' HTTP metrics (/metrics, /health, /ready) at P+401.. and
brokers' at P+501..; each node's `metrics_address` is in cluster.json for scrapers. Processes
are the business of `pykraft.cli.dev.processes`; nothing here starts one.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Role = Literal["controller", "broker"]

HOST = "127.0.0.1"
DEFAULT_BASE_PORT = 9090
CONTROLLER_GRPC_OFFSET = 1
CONTROLLER_RAFT_OFFSET = 101
BROKER_OFFSET = 201
KAFKA_OFFSET = 301
CONTROLLER_METRICS_OFFSET = 401
BROKER_METRICS_OFFSET = 501
METRICS_FLAG = "--metrics-listen"
KAFKA_SCHEME = "KAFKA://"
NODES_PER_ROLE_MAX = 99  # keeps each role's ports inside its block of 100
CLUSTER_FILE = "cluster.json"
DEFAULT_CLUSTER_ID = "pykraft-local"


class DevClusterError(Exception):
    """Something the user can fix or look into; the message says what, and which log to read."""


@dataclass(frozen=True)
class Node:
    """One process of the cluster; `pid` is None until started. `args` follow `pykraft`."""

    name: str
    role: Role
    id: int
    address: str
    data_dir: str
    args: tuple[str, ...]
    pid: int | None = None

    @property
    def log_path(self) -> Path:
        return Path(self.data_dir).parent / f"{self.name}.log"

    @property
    def ports(self) -> list[int]:
        """Every port the node binds (a controller's gRPC and Raft listeners, a broker's gRPC and
        Kafka listeners)."""
        listed = [self.address]
        if self.metrics_address is not None:
            listed.append(self.metrics_address)
        if self.role == "controller":
            listed.append(_flag(self.args, "--voters").split(",")[self.id - 1].split("@")[1])
        elif self.kafka_address is not None:
            listed.append(self.kafka_address)
        return [int(address.rpartition(":")[2]) for address in listed]

    @property
    def kafka_address(self) -> str | None:
        """A broker's Kafka listener (from its `--listeners`); None for controllers."""
        if self.role != "broker":
            return None
        for listener in _flag(self.args, "--listeners").split(","):
            if listener.startswith(KAFKA_SCHEME):
                return listener.removeprefix(KAFKA_SCHEME)
        return None

    @property
    def metrics_address(self) -> str | None:
        """The node's HTTP endpoint of /metrics, /health and /ready (host:port); None for a
        node planned before pykraft served metrics."""
        return _flag(self.args, METRICS_FLAG) if METRICS_FLAG in self.args else None

    def to_json(self) -> dict[str, Any]:
        """What cluster.json holds; `metrics_address` is for readers (derived from `args`)."""
        return {
            "name": self.name,
            "role": self.role,
            "id": self.id,
            "address": self.address,
            "metrics_address": self.metrics_address,
            "pid": self.pid,
            "data_dir": self.data_dir,
            "args": list(self.args),
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Node:
        role = raw["role"]
        if role not in ("controller", "broker"):
            raise ValueError(f"unknown role {role!r}")
        pid = raw["pid"]
        return cls(
            name=str(raw["name"]),
            role=role,
            id=int(raw["id"]),
            address=str(raw["address"]),
            data_dir=str(raw["data_dir"]),
            args=tuple(str(a) for a in raw["args"]),
            pid=None if pid is None else int(pid),
        )


@dataclass(frozen=True)
class DevCluster:
    """The cluster as written in cluster.json: its nodes, controllers first."""

    nodes: tuple[Node, ...] = field(default_factory=tuple)

    def by_role(self, role: Role) -> list[Node]:
        return [n for n in self.nodes if n.role == role]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.address for n in self.by_role("broker"))

    @property
    def kafka_bootstrap_servers(self) -> str:
        """Where Kafka clients (kcat, librdkafka, the Java client) connect."""
        addresses = (n.kafka_address for n in self.by_role("broker"))
        return ",".join(a for a in addresses if a is not None)

    @property
    def bootstrap_controllers(self) -> str:
        return ",".join(n.address for n in self.by_role("controller"))

    def node(self, name: str) -> Node:
        """The node called `name`; DevClusterError listing the names otherwise."""
        for node in self.nodes:
            if node.name == name:
                return node
        names = ", ".join(n.name for n in self.nodes)
        raise DevClusterError(f"no node {name!r} in this cluster (nodes: {names})")

    def with_node(self, node: Node) -> DevCluster:
        """This cluster with `node` replacing the one of the same name."""
        return DevCluster(tuple(node if n.name == node.name else n for n in self.nodes))

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": [n.to_json() for n in self.nodes],
            "bootstrap_servers": self.bootstrap_servers,
            "kafka_bootstrap_servers": self.kafka_bootstrap_servers,
            "bootstrap_controllers": self.bootstrap_controllers,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> DevCluster:
        return cls(tuple(Node.from_json(n) for n in raw["nodes"]))


def plan_cluster(
    controllers: int,
    brokers: int,
    data_dir: Path,
    base_port: int = DEFAULT_BASE_PORT,
    cluster_id: str = DEFAULT_CLUSTER_ID,
) -> DevCluster:
    """The layout of a new cluster (nothing started); ValueError on impossible counts or ports."""
    if controllers < 1 or controllers % 2 == 0 or controllers > NODES_PER_ROLE_MAX:
        raise ValueError(f"controllers must be odd, 1 to {NODES_PER_ROLE_MAX}; got {controllers}")
    if not 1 <= brokers <= NODES_PER_ROLE_MAX:
        raise ValueError(f"brokers must be 1 to {NODES_PER_ROLE_MAX}; got {brokers}")
    port_max = 65535 - BROKER_METRICS_OFFSET - NODES_PER_ROLE_MAX
    if not 1024 <= base_port <= port_max:
        raise ValueError(f"base port must be 1024 to {port_max}")
    root = data_dir.resolve()
    controller_nodes = _controllers(controllers, root, base_port, cluster_id)
    bootstrap = ",".join(n.address for n in controller_nodes)
    broker_nodes = [
        _broker(i, root, base_port + i - 1, bootstrap, cluster_id) for i in range(1, brokers + 1)
    ]
    return DevCluster((*controller_nodes, *broker_nodes))


def _controllers(count: int, root: Path, base_port: int, cluster_id: str) -> list[Node]:
    ids = range(1, count + 1)
    grpc_ports = {i: base_port + CONTROLLER_GRPC_OFFSET + i - 1 for i in ids}
    voters = ",".join(f"{i}@{HOST}:{base_port + CONTROLLER_RAFT_OFFSET + i - 1}" for i in ids)
    listeners = ",".join(f"{i}@{HOST}:{grpc_ports[i]}" for i in ids)
    nodes = []
    for i in ids:
        node_dir = str(root / f"controller-{i}")
        args: tuple[str, ...] = (
            "controller", "run", "--node-id", str(i), "--voters", voters,
            "--listeners", listeners, "--data-dir", node_dir,
            METRICS_FLAG, f"{HOST}:{base_port + CONTROLLER_METRICS_OFFSET + i - 1}",
            "--cluster-id", cluster_id,
        )  # fmt: skip
        address = f"{HOST}:{grpc_ports[i]}"
        nodes.append(Node(f"controller-{i}", "controller", i, address, node_dir, args))
    return nodes


def _broker(node_id: int, root: Path, port: int, bootstrap: str, cluster_id: str) -> Node:
    """Broker `node_id`, its gRPC listener at `port` + BROKER_OFFSET, Kafka's at + KAFKA_OFFSET,
    its metrics at + BROKER_METRICS_OFFSET."""
    node_dir = str(root / f"broker-{node_id}")
    address = f"{HOST}:{port + BROKER_OFFSET}"
    listeners = f"{address},{KAFKA_SCHEME}{HOST}:{port + KAFKA_OFFSET}"
    args: tuple[str, ...] = (
        "broker", "run", "--node-id", str(node_id), "--listeners", listeners,
        "--rack", f"rack-{node_id}", "--log-dirs", node_dir,
        "--bootstrap-controllers", bootstrap,
        METRICS_FLAG, f"{HOST}:{port + BROKER_METRICS_OFFSET}", "--cluster-id", cluster_id,
    )  # fmt: skip
    return Node(f"broker-{node_id}", "broker", node_id, address, node_dir, args)


def _flag(args: Sequence[str], name: str) -> str:
    return args[list(args).index(name) + 1]


def cluster_file(data_dir: Path) -> Path:
    return data_dir / CLUSTER_FILE


def save(cluster: DevCluster, data_dir: Path) -> None:
    """Writes cluster.json atomically (a reader never sees half a file)."""
    path = cluster_file(data_dir)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(cluster.to_json(), indent=2) + "\n")
    temporary.replace(path)


def load(data_dir: Path) -> DevCluster:
    """The cluster of `data_dir`; DevClusterError if there is none or the file is damaged."""
    path = cluster_file(data_dir)
    try:
        return DevCluster.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        raise DevClusterError(f"no cluster in {data_dir} ({path} is missing)") from None
    except (ValueError, KeyError, TypeError) as error:
        raise DevClusterError(f"{path} is damaged: {error!r}") from None


def taken_ports(cluster: DevCluster) -> list[int]:
    """The ports of `cluster` that something else already holds on 127.0.0.1."""
    taken = []
    for port in (p for node in cluster.nodes for p in node.ports):
        with socket.socket() as probe:
            # As the servers do: a port left in TIME_WAIT by the last run is free to listen on.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((HOST, port))
            except OSError:
                taken.append(port)
    return taken
