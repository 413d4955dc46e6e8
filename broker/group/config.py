"""The group coordinator's settings: Kafka's broker config names and defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

OFFSETS_TOPIC: Final = "__consumer_offsets"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    # group.consumer.session.timeout.ms / heartbeat.interval.ms (KIP-848)
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    # group.consumer.assignors: the first is the default
    assignors: tuple[str, ...] = ("uniform", "range")
    # group.consumer.max.size
    members_max: int = 1_000
    # offsets.topic.num.partitions / offsets.topic.replication.factor
    offsets_topic_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    # offsets.retention.minutes, as ms / offsets.retention.check.interval.ms
    offsets_retention_ms: int = 10_080 * 60_000
    offsets_retention_check_interval_ms: int = 600_000
    # offset.metadata.max.bytes
    offset_metadata_bytes_max: int = 4096
    # offsets.commit.timeout.ms: how long a write waits for every in-sync replica
    commit_timeout_ms: int = 5_000
    # group.initial.rebalance.delay.ms: how long the first rebalance of an empty classic
    # group waits for more members (0: it does not wait)
    initial_rebalance_delay_ms: int = 3_000

    def __post_init__(self) -> None:
        for name in (
            "session_timeout_ms",
            "heartbeat_interval_ms",
            "members_max",
            "offsets_topic_partitions",
            "offsets_topic_replication_factor",
            "offsets_retention_ms",
            "offsets_retention_check_interval_ms",
            "commit_timeout_ms",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.initial_rebalance_delay_ms < 0:
            raise ValueError(
                "group.initial.rebalance.delay.ms must not be negative, got "
                f"{self.initial_rebalance_delay_ms}"
            )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must be shorter than "
                "group.consumer.session.timeout.ms"
            )
        if not self.assignors:
            raise ValueError("group.consumer.assignors must name at least one assignor")
