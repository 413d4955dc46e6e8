"""The consumer's settings: Kafka's names (with `_` for `.`) and defaults, checked once.

`ConsumerConfig` raises ValueError with a sentence naming the setting for any bad value, so a
typo fails at construction rather than as an odd fetch later. What callers may rely on: every
field of a built config is valid.

One setting is not Kafka's: `fetch_buffer_bytes_max`, the prefetch buffer's limit (the
consumer's default: `fetch_max_bytes`).
`client_rack` (Kafka's client.rack; "" for none) goes with each Fetch, so leaders may name a
replica in that rack to read from instead (KIP-392); such a preferred read replica is used for
at most `metadata_max_age_ms` before the leader is asked again (`read_replica`).
`isolation_level="read_committed"` is accepted and sent to brokers, but pykraft has no
transactions yet: every record is committed (the last stable offset is the high-water mark),
so both levels read the same records until transactions exist.

The group settings (`group_id` and after) matter only with a `group_id`; without one the consumer
reads what it is assigned and neither joins a group nor commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

AUTO_OFFSET_RESETS: Final = ("earliest", "latest", "none")
# ConsumerGroupHeartbeat carries max_poll_interval_ms as rebalance_timeout_ms, an int32.
INT32_MAX: Final = 2**31 - 1
# Kafka's IsolationLevel ids, as Fetch and ListOffsets carry them.
ISOLATION_LEVELS: Final = {"read_uncommitted": 0, "read_committed": 1}


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    auto_offset_reset: str = "latest"
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    max_partition_fetch_bytes: int = 1048576
    fetch_max_bytes: int = 52428800
    fetch_buffer_bytes_max: int = 52428800  # not Kafka's: the prefetch buffer's limit
    max_poll_records: int = 500
    isolation_level: str = "read_uncommitted"
    request_timeout_ms: int = 30000
    default_api_timeout_ms: int = 60000
    retry_backoff_ms: int = 100
    client_id: str = ""
    check_crcs: bool = True
    group_id: str | None = None
    group_instance_id: str | None = None
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    max_poll_interval_ms: int = 300000
    group_remote_assignor: str | None = None
    client_rack: str = ""
    metadata_max_age_ms: int = 300000

    def __post_init__(self) -> None:
        if self.auto_offset_reset not in AUTO_OFFSET_RESETS:
            raise ValueError(
                f"auto_offset_reset must be 'earliest', 'latest' or 'none', "
                f"not {self.auto_offset_reset!r}."
            )
        if self.isolation_level not in ISOLATION_LEVELS:
            raise ValueError(
                f"isolation_level must be 'read_uncommitted' or 'read_committed', "
                f"not {self.isolation_level!r}."
            )
        for name, low in _INTEGER_MINIMUMS:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer of at least {low}, not {value!r}.")
        if not isinstance(self.check_crcs, bool):
            raise ValueError(f"check_crcs must be True or False, not {self.check_crcs!r}.")
        for name in ("client_id", "client_rack"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a string, not {getattr(self, name)!r}.")
        self._check_group()

    def _check_group(self) -> None:
        for name in ("group_id", "group_instance_id", "group_remote_assignor"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{name} must be a non-empty string or None, not {value!r}.")
        if self.group_instance_id is not None and self.group_id is None:
            raise ValueError(
                "group_instance_id makes a static member of a group: it needs a group_id."
            )
        if not isinstance(self.enable_auto_commit, bool):
            raise ValueError(
                f"enable_auto_commit must be True or False, not {self.enable_auto_commit!r}."
            )
        if self.max_poll_interval_ms > INT32_MAX:
            raise ValueError(
                f"max_poll_interval_ms must be at most {INT32_MAX}, "
                f"not {self.max_poll_interval_ms!r}."
            )

    @property
    def isolation_level_id(self) -> int:
        return ISOLATION_LEVELS[self.isolation_level]


# (setting, smallest valid value)
_INTEGER_MINIMUMS: Final = (
    ("fetch_min_bytes", 0),
    ("fetch_max_wait_ms", 0),
    ("max_partition_fetch_bytes", 1),
    ("fetch_max_bytes", 1),
    ("fetch_buffer_bytes_max", 1),
    ("max_poll_records", 1),
    ("request_timeout_ms", 1),
    ("default_api_timeout_ms", 1),
    ("retry_backoff_ms", 0),
    ("auto_commit_interval_ms", 0),
    ("max_poll_interval_ms", 1),
    ("metadata_max_age_ms", 0),
)
