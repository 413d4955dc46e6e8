"""A partition log's settings: Kafka's topic configs (names, defaults, units) as one frozen value.

`LogConfig` field names are Kafka's topic config names with dots as underscores; defaults are
Kafka's. `LogConfig.from_topic_configs` reads the string form the controller stores
(`pykraft.metadata_log.configs.TOPIC_CONFIGS` keys), so a topic's overrides apply as they would
in Kafka. Time-based settings are compared with record timestamps and `now_ms`, never a clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from pykraft.metadata_log.configs import LONG_MAX, validate_config
from pykraft.metadata_log.records import ConfigResourceType
from pykraft.proto.record_batch import TimestampType

_TIMESTAMP_TYPES: Final = {
    "CreateTime": TimestampType.CREATE_TIME,
    "LogAppendTime": TimestampType.LOG_APPEND_TIME,
}


@dataclasses.dataclass(frozen=True)
class LogConfig:
    """Kafka's per-topic log settings. Sizes in bytes, times in milliseconds; -1 in
    retention_ms / retention_bytes means no limit; LONG_MAX flush settings mean never fsync on
    count or age (Kafka relies on replication, not fsync, for durability)."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    message_timestamp_type: TimestampType = TimestampType.CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX

    def __post_init__(self) -> None:
        assert self.segment_bytes > 0, "segment.bytes must be positive"
        assert self.segment_ms > 0, "segment.ms must be positive"
        assert self.segment_index_bytes > 0, "segment.index.bytes must be positive"
        assert self.index_interval_bytes >= 0, "index.interval.bytes may not be negative"
        assert self.flush_messages > 0, "flush.messages must be positive"
        assert self.flush_ms >= 0, "flush.ms may not be negative"
        assert set(self.cleanup_policy) <= {"delete", "compact"}, self.cleanup_policy

    @property
    def deletes_old_segments(self) -> bool:
        """Whether retention.ms and retention.bytes apply (cleanup.policy includes delete)."""
        return "delete" in self.cleanup_policy

    @staticmethod
    def from_topic_configs(configs: Mapping[str, str]) -> LogConfig:
        """The log settings of a topic whose configs (Kafka names, string values) are `configs`;
        keys it does not mention keep Kafka's defaults, and topic configs the log does not use
        (min.insync.replicas, ...) are ignored. Raises ConfigValidationError (a ValueError) for
        an unknown key or a value Kafka would refuse."""
        values: dict[str, Any] = {}
        for name, text in configs.items():
            normal = validate_config(ConfigResourceType.TOPIC, name, text)
            field = name.replace(".", "_")
            if field not in _FIELD_NAMES:
                continue
            if field == "cleanup_policy":
                values[field] = tuple(normal.split(","))
            elif field == "message_timestamp_type":
                values[field] = _TIMESTAMP_TYPES[normal]
            else:
                values[field] = int(normal)
        return LogConfig(**values)


_FIELD_NAMES: Final = frozenset(field.name for field in dataclasses.fields(LogConfig))
