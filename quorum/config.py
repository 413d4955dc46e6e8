"""A controller's configuration: from a TOML file, overridden by command-line flags.

Keys use Kafka's names where Kafka has one (`node.id`, `controller.quorum.voters`,
`broker.session.timeout.ms`); `controller.quorum.voters` is in Kafka's `id@host:port,...` form and
names the Raft listeners; `controller.listeners` names each controller's gRPC listener in the same
form, so any controller can redirect a client to the active one.

Both are what a controller uses on its first start only: afterwards the voter set changes through
the Raft log (`pykraft quorum add-controller` / `remove-controller`) and the controller starts
from the set it persisted (`quorum/raft/voters.py`). A controller joining a running quorum names
the current voters and itself (so, briefly, an even number of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

from pykraft.quorum.controller.heartbeats import PARTITION_CHANGES_PER_STEP_MAX
from pykraft.quorum.raft.api import ENTRY_BYTES_MAX_DEFAULT
from pykraft.server_common.config_files import ConfigError, read_settings
from pykraft.server_common.grpc_server import GRPC_MESSAGE_BYTES_MAX
from pykraft.server_common.node_http import METRICS_LISTEN_KEY, parse_metrics_listen
from pykraft.server_common.process import LOG_FORMAT_KEY, parse_log_format

# The smallest MetadataFetch message limit a controller takes or a broker may ask for: below it
# a stream would spend more on framing and round trips than on records.
METADATA_FETCH_BYTES_MIN: Final = 64 * 1024


@dataclass(frozen=True)
class ControllerConfig:
    node_id: int
    voters: Mapping[int, str]
    controller_listeners: Mapping[int, str]
    data_dir: Path
    cluster_id: str = "pykraft-local"
    broker_session_timeout_ms: int = 9000
    metadata_tail_records_max: int = 10_000
    # The largest MetadataFetch answer message (the stream carries as many as it needs).
    metadata_fetch_bytes_max: int = 4 * 1024 * 1024
    metadata_fetch_wait_max_ms: int = 5000
    raft_compaction_min_entries: int = 5000
    request_timeout_ms: int = 30_000
    events_queue_max: int = 10_000
    # Threads for short requests; each broker's long-held calls (its session stream and its
    # metadata long poll) get threads of their own, for up to `broker_sessions_max` brokers.
    grpc_workers_max: int = 64
    broker_sessions_max: int = 1000
    # Group commit (controller_core.py): writes decided while this controller's last entry is
    # being committed share the next entry, which leaves once that one commits, after
    # `append_linger_ms` at the latest (Kafka's controller.quorum.append.linger.ms), or when
    # `entry_operations_max` writes or `raft_entry_bytes_max` bytes (RaftConfig's) fill it.
    append_linger_ms: int = 25
    entry_operations_max: int = 1000
    raft_entry_bytes_max: int = ENTRY_BYTES_MAX_DEFAULT
    # Partitions one step of a fence or controlled shutdown changes (controller/leaving.py).
    partition_changes_per_step_max: int = PARTITION_CHANGES_PER_STEP_MAX
    # Kafka's automatic preferred leader election (see controller/elections.py).
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    # The HTTP endpoint of /metrics, /health and /ready ("": none; port 0 picks one).
    metrics_listen: str = ""
    log_format: str = "text"  # text or json (server_common.process)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def listener(self) -> str:
        return self.controller_listeners[self.node_id]

    def __post_init__(self) -> None:
        if self.node_id not in self.voters:
            raise ConfigError(f"node.id {self.node_id} is not in controller.quorum.voters")
        if set(self.voters) != set(self.controller_listeners):
            raise ConfigError(
                "controller.quorum.voters and controller.listeners must name the same node ids"
            )
        if (
            self.broker_session_timeout_ms <= 0
            or self.metadata_tail_records_max <= 0
            or self.leader_imbalance_check_interval_seconds <= 0
            or self.grpc_workers_max <= 0
            or self.broker_sessions_max <= 0
            or self.append_linger_ms < 0
            or self.entry_operations_max <= 0
            or self.raft_entry_bytes_max <= 0
            or self.partition_changes_per_step_max <= 0
        ):
            raise ConfigError("timeouts and limits must be positive")
        if not METADATA_FETCH_BYTES_MIN <= self.metadata_fetch_bytes_max <= GRPC_MESSAGE_BYTES_MAX:
            raise ConfigError(
                f"metadata.fetch.bytes.max must be within [{METADATA_FETCH_BYTES_MIN}, "
                f"{GRPC_MESSAGE_BYTES_MAX}], not {self.metadata_fetch_bytes_max}"
            )


# TOML / flag key -> dataclass field.
_KEYS = {
    "node.id": "node_id",
    "controller.quorum.voters": "voters",
    "controller.listeners": "controller_listeners",
    "data.dir": "data_dir",
    "cluster.id": "cluster_id",
    "broker.session.timeout.ms": "broker_session_timeout_ms",
    "metadata.tail.records.max": "metadata_tail_records_max",
    "metadata.fetch.bytes.max": "metadata_fetch_bytes_max",
    "raft.compaction.min.entries": "raft_compaction_min_entries",
    "grpc.workers.max": "grpc_workers_max",
    "broker.sessions.max": "broker_sessions_max",
    "controller.quorum.append.linger.ms": "append_linger_ms",
    "metadata.entry.operations.max": "entry_operations_max",
    "raft.entry.bytes.max": "raft_entry_bytes_max",
    "controller.partition.changes.per.step.max": "partition_changes_per_step_max",
    "auto.leader.rebalance.enable": "auto_leader_rebalance_enable",
    "leader.imbalance.check.interval.seconds": "leader_imbalance_check_interval_seconds",
    METRICS_LISTEN_KEY: "metrics_listen",
    LOG_FORMAT_KEY: "log_format",
}


def parse_node_addresses(text: str, *, key: str) -> dict[int, str]:
    """Parses Kafka's `1@host:port,2@host:port` form."""
    nodes: dict[int, str] = {}
    for item in (part.strip() for part in text.split(",")):
        node, at, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        if not (at and colon and host and node.isdigit() and port.isdigit()):
            raise ConfigError(f"{key}: {item!r} is not of the form id@host:port")
        if int(node) in nodes:
            raise ConfigError(f"{key}: node id {node} appears twice")
        nodes[int(node)] = address
    return nodes


def load_config(path: Path | None, overrides: Mapping[str, Any]) -> ControllerConfig:
    """Reads `path` (TOML, optional), applies `overrides` (flag values keyed like the TOML keys)."""
    raw = read_settings(path, overrides)
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise ConfigError(f"unknown config keys: {', '.join(unknown)}")
    values = {_KEYS[k]: v for k, v in raw.items()}
    for required in ("node.id", "controller.quorum.voters", "controller.listeners", "data.dir"):
        if _KEYS[required] not in values:
            raise ConfigError(f"missing required setting {required}")
    for key in ("controller.quorum.voters", "controller.listeners"):
        values[_KEYS[key]] = parse_node_addresses(str(values[_KEYS[key]]), key=key)
    values["data_dir"] = Path(values["data_dir"])
    values["metrics_listen"] = parse_metrics_listen(values.get("metrics_listen", ""))
    values["log_format"] = parse_log_format(values.get("log_format", "text"))
    return _typed(values)


def _typed(values: dict[str, Any]) -> ControllerConfig:
    ints = {f.name for f in fields(ControllerConfig) if f.type == "int"}
    for name in ints & set(values):
        try:
            values[name] = int(values[name])
        except (TypeError, ValueError) as error:
            raise ConfigError(f"{name} must be an integer, got {values[name]!r}") from error
    bools = {f.name for f in fields(ControllerConfig) if f.type == "bool"}
    for name in bools & set(values):
        if not isinstance(values[name], bool):
            raise ConfigError(f"{name} must be true or false, got {values[name]!r}")
    config = ControllerConfig(**values)
    return replace(config)
