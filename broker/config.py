"""A broker's configuration: from a TOML file, overridden by command-line flags.

Keys are Kafka's names (`node.id`, `listeners`, `broker.rack`, `log.dirs`,
`controller.quorum.bootstrap.servers`, ...) with Kafka's defaults. `listeners` uses Kafka's syntax,
`GRPC://host:port,KAFKA://host:port,DATA://host:port`: the gRPC listener (required; a bare
`host:port` names it), the Kafka protocol listener (optional) and the data plane's own listener
(`pykraft.proto.data_plane`: Produce and Fetch for pykraft's clients and follower brokers;
when not named, the gRPC listener's host on a port the system picks). `advertised.listeners`,
same syntax, is what the broker registers for clients to connect to; each listener not named
there is advertised as bound.
`log.dirs` and `controller.quorum.bootstrap.servers` are comma-separated.
Broker-wide defaults of topic configs (`log.retention.ms`, `min.insync.replicas`, ...) are the
ones in `pykraft.metadata_log.configs.BROKER_SYNONYMS`, kept as strings in `topic_defaults`.

`log.open.files.max` bounds the segment files a broker keeps open (`log.open_files`; the indexes
are open only while written); it must leave `OPEN_FILES_RESERVED` descriptors of the process's
limit for sockets, checkpoints and the metadata log (`check_open_files_limit`).

`replica.selector.class` (Kafka's class names, `replica_selector.REPLICA_SELECTORS`; unset:
the leader) picks consumers' preferred read replicas (KIP-392).

Test-only (never set it in production): `test.drop.produce.responses.every` = N > 0 makes the
broker drop the response of every Nth Produce request that carries idempotent batches, after
fully processing it (see `service`), so tests can make producers retry a written batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pykraft.broker.group.config import GroupConfig
from pykraft.broker.log.open_files import LOG_OPEN_FILES_MAX_DEFAULT
from pykraft.broker.replica_selector import REPLICA_SELECTORS
from pykraft.metadata_log import BROKER_SYNONYMS, ConfigValidationError, validate_config
from pykraft.metadata_log.records import ConfigResourceType
from pykraft.server_common.config_files import ConfigError, read_settings
from pykraft.server_common.node_http import METRICS_LISTEN_KEY, parse_metrics_listen
from pykraft.server_common.process import LOG_FORMAT_KEY, parse_log_format


@dataclass(frozen=True)
class BrokerConfig:
    node_id: int
    listener: str  # the gRPC listener's host:port
    log_dirs: tuple[Path, ...]
    controller_bootstrap_servers: tuple[str, ...]
    rack: str = ""
    cluster_id: str = "pykraft-local"
    heartbeat_interval_ms: int = 2000
    session_timeout_ms: int = 9000
    replica_lag_time_max_ms: int = 30_000
    # Broker-wide defaults of topic configs, by the topic config's name.
    topic_defaults: Mapping[str, str] = field(default_factory=dict)
    metadata_fetch_wait_ms: int = 1000
    request_timeout_ms: int = 5000
    # Request threads for short requests; parked fetches get threads of their own, at most
    # `fetch_waits_max` at once (beyond that a fetch answers without waiting).
    grpc_workers_max: int = 64
    fetch_waits_max: int = 1000
    # Kafka's LogManager: how often retention runs, how long the cleaner rests between passes.
    log_retention_check_interval_ms: int = 300_000
    log_cleaner_backoff_ms: int = 15_000
    # How often the log directories' recovery point, log start and high watermark checkpoint
    # files are written (Kafka's log.flush.offset.checkpoint.interval.ms).
    log_flush_offset_checkpoint_interval_ms: int = 60_000
    log_open_files_max: int = LOG_OPEN_FILES_MAX_DEFAULT
    # Threads per log directory that open logs at start-up and close them at shutdown (Kafka's
    # num.recovery.threads.per.data.dir; Kafka's default is 1, ours 4: fsyncs dominate both).
    num_recovery_threads_per_data_dir: int = 4
    # Test-only: drop every Nth idempotent Produce response after processing it (0 = never).
    test_drop_produce_responses_every: int = 0
    # The group coordinator's settings (group.consumer.*, offsets.*).
    group: GroupConfig = field(default_factory=GroupConfig)
    # The Kafka protocol listener's host:port ("": none); advertised addresses ("": as bound).
    kafka_listener: str = ""
    advertised_listener: str = ""
    advertised_kafka_listener: str = ""
    # The data plane listener's host:port ("": the gRPC listener's host, any free port).
    data_listener: str = ""
    advertised_data_listener: str = ""
    replica_selector_class: str = ""
    # The HTTP endpoint of /metrics, /health and /ready ("": none; port 0 picks one).
    metrics_listen: str = ""
    log_format: str = "text"  # text or json (server_common.process)

    def __post_init__(self) -> None:
        if self.node_id < 0:
            raise ConfigError(f"node.id must be 0 or more, got {self.node_id}")
        if not self.log_dirs:
            raise ConfigError("log.dirs must name at least one directory")
        if not self.controller_bootstrap_servers:
            raise ConfigError("controller.quorum.bootstrap.servers must name a controller")
        if self.heartbeat_interval_ms <= 0:
            raise ConfigError("broker.heartbeat.interval.ms must be positive")
        if self.session_timeout_ms <= self.heartbeat_interval_ms:
            raise ConfigError(
                "broker.session.timeout.ms must be longer than broker.heartbeat.interval.ms"
            )
        intervals = (
            self.log_retention_check_interval_ms,
            self.log_cleaner_backoff_ms,
            self.log_flush_offset_checkpoint_interval_ms,
        )
        if min(intervals) <= 0:
            raise ConfigError(
                "log.retention.check.interval.ms, log.cleaner.backoff.ms and "
                "log.flush.offset.checkpoint.interval.ms must be positive"
            )
        if self.log_open_files_max <= 0:
            raise ConfigError("log.open.files.max must be positive")
        if self.num_recovery_threads_per_data_dir <= 0:
            raise ConfigError("num.recovery.threads.per.data.dir must be positive")
        if self.replica_lag_time_max_ms <= 0:
            raise ConfigError("replica.lag.time.max.ms must be positive")
        if self.grpc_workers_max <= 0 or self.fetch_waits_max <= 0:
            raise ConfigError("grpc.workers.max and fetch.waits.max must be positive")
        if self.replica_selector_class not in REPLICA_SELECTORS:
            raise ConfigError(
                f"replica.selector.class: {self.replica_selector_class!r} is none of "
                f"{', '.join(s for s in REPLICA_SELECTORS if s)}"
            )
        if self.test_drop_produce_responses_every < 0:
            raise ConfigError("test.drop.produce.responses.every must be 0 (off) or more")

    @property
    def host(self) -> str:
        return self.listener.rpartition(":")[0]

    @property
    def port(self) -> int:
        return int(self.listener.rpartition(":")[2])

    @property
    def kafka_host(self) -> str:
        return self.kafka_listener.rpartition(":")[0]

    @property
    def kafka_port(self) -> int:
        return int(self.kafka_listener.rpartition(":")[2])

    @property
    def data_bind(self) -> tuple[str, int]:
        """Where the data plane listener binds: its own listener, else the gRPC host, port 0."""
        address = self.data_listener or f"{self.host}:0"
        return address.rpartition(":")[0], int(address.rpartition(":")[2])

    def advertised_endpoints(self, data_port: int = 0) -> tuple[tuple[str, str, int], ...]:
        """(name, host, port) of each listener, as the broker registers them: the gRPC one first
        (what pykraft's own clients read), then the Kafka one if any, then the data plane's
        when it is bound (`data_port`, the port it got; on its own listener's host, else the
        advertised gRPC host, unless advertised.listeners names it)."""
        grpc_address = self.advertised_listener or self.listener
        endpoints = [(GRPC_ENDPOINT_NAME, grpc_address)]
        if self.kafka_listener:
            kafka = self.advertised_kafka_listener or self.kafka_listener
            endpoints.append((KAFKA_ENDPOINT_NAME, kafka))
        if data_port:
            data_host = (self.data_listener or grpc_address).rpartition(":")[0]
            data = self.advertised_data_listener or f"{data_host}:{data_port}"
            endpoints.append((DATA_ENDPOINT_NAME, data))
        return tuple(
            (name, address.rpartition(":")[0], int(address.rpartition(":")[2]))
            for name, address in endpoints
        )

    @property
    def metadata_dir(self) -> Path:
        """Where the broker keeps its copy of the metadata image (Kafka's __cluster_metadata)."""
        return self.log_dirs[0] / "__cluster_metadata"


# Registered endpoint names: the gRPC listener keeps the name it always had; the Kafka one is
# pykraft.broker.kafka.api.KAFKA_LISTENER_NAME (not imported: that module imports this one).
GRPC_ENDPOINT_NAME: Final = "PLAINTEXT"
KAFKA_ENDPOINT_NAME: Final = "KAFKA"
DATA_ENDPOINT_NAME: Final = "DATA"
# Listener names in `listeners`: GRPC://, KAFKA://, DATA://.
_GRPC: Final = "GRPC"
_LISTENER_NAMES: Final = (_GRPC, KAFKA_ENDPOINT_NAME, DATA_ENDPOINT_NAME)
# Binds every interface but names none a client could reach: never advertised (as in Kafka).
_WILDCARD_HOST: Final = "0.0.0.0"

_INT_KEYS: Final = {
    "node.id": "node_id",
    "broker.heartbeat.interval.ms": "heartbeat_interval_ms",
    "broker.session.timeout.ms": "session_timeout_ms",
    "replica.lag.time.max.ms": "replica_lag_time_max_ms",
    "log.retention.check.interval.ms": "log_retention_check_interval_ms",
    "log.cleaner.backoff.ms": "log_cleaner_backoff_ms",
    "log.flush.offset.checkpoint.interval.ms": "log_flush_offset_checkpoint_interval_ms",
    "log.open.files.max": "log_open_files_max",
    "num.recovery.threads.per.data.dir": "num_recovery_threads_per_data_dir",
    "grpc.workers.max": "grpc_workers_max",
    "fetch.waits.max": "fetch_waits_max",
    "test.drop.produce.responses.every": "test_drop_produce_responses_every",
}
_STR_KEYS: Final = {
    "broker.rack": "rack",
    "cluster.id": "cluster_id",
    "replica.selector.class": "replica_selector_class",
}
# Group coordinator settings: Kafka's name -> GroupConfig field (minutes become ms).
_GROUP_INT_KEYS: Final = {
    "group.consumer.session.timeout.ms": "session_timeout_ms",
    "group.consumer.heartbeat.interval.ms": "heartbeat_interval_ms",
    "offsets.topic.num.partitions": "offsets_topic_partitions",
    "offsets.topic.replication.factor": "offsets_topic_replication_factor",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "offset.metadata.max.bytes": "offset_metadata_bytes_max",
    "offsets.commit.timeout.ms": "commit_timeout_ms",
    "group.initial.rebalance.delay.ms": "initial_rebalance_delay_ms",
}
_GROUP_KEYS: Final = {*_GROUP_INT_KEYS, "offsets.retention.minutes", "group.consumer.assignors"}
_REQUIRED: Final = ("node.id", "listeners", "log.dirs", "controller.quorum.bootstrap.servers")
KNOWN_KEYS: Final = frozenset(
    {*_INT_KEYS, *_STR_KEYS, "listeners", "advertised.listeners", "log.dirs"}
    | {METRICS_LISTEN_KEY, LOG_FORMAT_KEY}
    | {"controller.quorum.bootstrap.servers"}
    | set(BROKER_SYNONYMS)
    | _GROUP_KEYS
)


def parse_address(text: str, *, key: str) -> str:
    """Checks Kafka's `host:port` form and returns it stripped."""
    host, colon, port = text.strip().rpartition(":")
    if not (colon and host and port.isdigit() and 0 < int(port) < 65536):
        raise ConfigError(f"{key}: {text.strip()!r} is not of the form host:port")
    return text.strip()


def parse_listeners(text: object, *, key: str) -> dict[str, str]:
    """Kafka's `NAME://host:port,...` (NAME is GRPC, KAFKA or DATA; a bare host:port is GRPC), by
    name."""
    listeners: dict[str, str] = {}
    for item in _split(text):
        name, scheme, address = item.rpartition("://")
        name = name.upper() if scheme else _GRPC
        if name not in _LISTENER_NAMES:
            raise ConfigError(f"{key}: unknown listener {name!r} (GRPC://, KAFKA:// or DATA://)")
        if name in listeners:
            raise ConfigError(f"{key}: {name} is named twice")
        listeners[name] = parse_address(address, key=key)
    return listeners


def _listener_fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    listeners = parse_listeners(raw["listeners"], key="listeners")
    if _GRPC not in listeners:
        raise ConfigError(f"listeners must name the gRPC listener, got {raw['listeners']!r}")
    advertised = parse_listeners(raw.get("advertised.listeners", ""), key="advertised.listeners")
    if not set(advertised) <= set(listeners):
        raise ConfigError("advertised.listeners names a listener that listeners does not")
    for name, address in {**listeners, **advertised}.items():
        if address.rpartition(":")[0] == _WILDCARD_HOST and name not in advertised:
            raise ConfigError(f"{name} binds {_WILDCARD_HOST}: set advertised.listeners for it")
    return {
        "listener": listeners[_GRPC],
        "kafka_listener": listeners.get(KAFKA_ENDPOINT_NAME, ""),
        "advertised_listener": advertised.get(_GRPC, ""),
        "advertised_kafka_listener": advertised.get(KAFKA_ENDPOINT_NAME, ""),
        "data_listener": listeners.get(DATA_ENDPOINT_NAME, ""),
        "advertised_data_listener": advertised.get(DATA_ENDPOINT_NAME, ""),
    }


def _split(text: object) -> list[str]:
    items = text if isinstance(text, list) else str(text).split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def _int(raw: Mapping[str, Any], key: str) -> int:
    value = raw[key]
    if isinstance(value, bool):
        raise ConfigError(f"{key} must be an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{key} must be an integer, got {value!r}") from error


def _topic_defaults(raw: Mapping[str, Any]) -> dict[str, str]:
    defaults: dict[str, str] = {}
    for broker_name, topic_name in BROKER_SYNONYMS.items():
        if broker_name not in raw:
            continue
        try:
            text = validate_config(ConfigResourceType.BROKER, broker_name, str(raw[broker_name]))
        except ConfigValidationError as error:
            raise ConfigError(str(error)) from error
        defaults[topic_name] = text
    return defaults


def _group_config(raw: Mapping[str, Any]) -> GroupConfig:
    values: dict[str, Any] = {
        name: _int(raw, key) for key, name in _GROUP_INT_KEYS.items() if key in raw
    }
    if "offsets.retention.minutes" in raw:
        values["offsets_retention_ms"] = _int(raw, "offsets.retention.minutes") * 60_000
    if "group.consumer.assignors" in raw:
        values["assignors"] = tuple(_split(raw["group.consumer.assignors"]))
    try:
        return GroupConfig(**values)
    except ValueError as error:
        raise ConfigError(str(error)) from error


def config_from_mapping(raw: Mapping[str, Any]) -> BrokerConfig:
    """Builds a BrokerConfig from keys named as in the TOML file; ConfigError says what is wrong."""
    unknown = sorted(set(raw) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"unknown config keys: {', '.join(unknown)}")
    missing = [key for key in _REQUIRED if key not in raw]
    if missing:
        raise ConfigError(f"missing required setting {', '.join(missing)}")
    values: dict[str, Any] = {name: _int(raw, key) for key, name in _INT_KEYS.items() if key in raw}
    values.update({name: str(raw[key]) for key, name in _STR_KEYS.items() if key in raw})
    bootstrap_key = "controller.quorum.bootstrap.servers"
    return BrokerConfig(
        **_listener_fields(raw),
        log_dirs=tuple(Path(item) for item in _split(raw["log.dirs"])),
        controller_bootstrap_servers=tuple(
            parse_address(item, key=bootstrap_key) for item in _split(raw[bootstrap_key])
        ),
        topic_defaults=_topic_defaults(raw),
        group=_group_config(raw),
        metrics_listen=parse_metrics_listen(raw.get(METRICS_LISTEN_KEY, "")),
        log_format=parse_log_format(raw.get(LOG_FORMAT_KEY, "text")),
        **values,
    )


# Descriptors beyond log.open.files.max a broker needs: connections, checkpoint and index writes,
# the metadata image, duplicates lent to answers in flight.
OPEN_FILES_RESERVED: Final = 256


def check_open_files_limit(config: BrokerConfig, limit: int) -> None:
    """ConfigError when the process's open-file limit (`limit`, after raising it) is too low for
    `log.open.files.max`: a broker would otherwise fail with "Too many open files" under load."""
    needed = config.log_open_files_max + OPEN_FILES_RESERVED
    if limit < needed:
        raise ConfigError(
            f"log.open.files.max={config.log_open_files_max} needs {needed} open files "
            f"({OPEN_FILES_RESERVED} more for connections and checkpoints) but this process may "
            f"open only {limit} (its hard RLIMIT_NOFILE, ulimit -Hn): lower log.open.files.max "
            "or raise the limit"
        )


def load_config(path: Path | None, overrides: Mapping[str, Any]) -> BrokerConfig:
    """Reads `path` (TOML, optional), then applies `overrides` (flag values keyed like the TOML
    keys; None means the flag was not given)."""
    return config_from_mapping(read_settings(path, overrides))
