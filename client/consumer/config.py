"""The consumer's settings: Kafka's names (with `_` for `.`) and defaults, checked once.

`ConsumerConfig` raises ValueError with a sentence naming the setting for any bad value, so a
typo fails at construction rather than as an odd fetch later. What callers may rely on: every
field of a built config is valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

AUTO_OFFSET_RESETS: Final = ("earliest", "latest", "none")
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
        if not isinstance(self.client_id, str):
            raise ValueError(f"client_id must be a string, not {self.client_id!r}.")

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
)
