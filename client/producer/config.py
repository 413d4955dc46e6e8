"""The producer's settings: Kafka's names (with `_` for `.`) and defaults, checked once.

`ProducerConfig` raises ValueError with a sentence naming the setting for any bad value, so a
typo fails at construction rather than as an odd send later. What callers may rely on: every
field of a built config is valid, and the derived fields (`acks_id`, `compression`,
`idempotent`) are what the wire and the batches use.

Idempotence follows Kafka's rule: asked for explicitly (`enable_idempotence=True`) it needs
acks="all", retries > 0 and at most 5 requests in flight per connection, else a ValueError;
left unset (None) it is on unless those settings conflict with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from pykraft.proto.record_batch import Compression

INT32_MAX: Final = 2**31 - 1
# Kafka's limit of requests in flight per connection under which idempotence keeps order.
IDEMPOTENT_IN_FLIGHT_MAX: Final = 5

_ACKS: Final[dict[str | int, int]] = {
    "all": -1, -1: -1, "-1": -1, 0: 0, "0": 0, 1: 1, "1": 1,
}  # fmt: skip
_COMPRESSION: Final[dict[str | None, Compression]] = {
    None: Compression.NONE,
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """Kafka's producer configs; `max_in_flight_requests_per_connection` is Kafka's
    max.in.flight.requests.per.connection, `max_request_size` its max.request.size (the
    bytes of batches one Produce request carries), `max_block_ms` its max.block.ms (how long
    `send` waits for metadata and buffer space)."""

    acks: str | int = "all"
    linger_ms: int = 5
    batch_size: int = 16384
    compression_type: str | None = None
    retries: int = INT32_MAX
    retry_backoff_ms: int = 100
    request_timeout_ms: int = 30000
    delivery_timeout_ms: int = 120000
    max_in_flight_requests_per_connection: int = 5
    enable_idempotence: bool | None = None
    max_request_size: int = 1048576
    buffer_memory: int = 33554432
    max_block_ms: int = 60000
    client_id: str = ""
    acks_id: int = field(init=False)  # acks as the wire carries it: -1 (all), 0 or 1
    compression: Compression = field(init=False)
    idempotent: bool = field(init=False)  # enable_idempotence, resolved by Kafka's rule

    def __post_init__(self) -> None:
        _require(self.acks in _ACKS, f"acks must be 'all', -1, 0 or 1, not {self.acks!r}.")
        _require(
            self.compression_type in _COMPRESSION,
            f"compression_type must be one of none, gzip, snappy, lz4, zstd, "
            f"not {self.compression_type!r}.",
        )
        for name, low in _INTEGER_MINIMUMS:
            value = getattr(self, name)
            _require(
                isinstance(value, int) and not isinstance(value, bool) and value >= low,
                f"{name} must be an integer of at least {low}, not {value!r}.",
            )
        _require(
            self.delivery_timeout_ms >= self.linger_ms + self.request_timeout_ms,
            f"delivery_timeout_ms ({self.delivery_timeout_ms}) must be at least linger_ms + "
            f"request_timeout_ms ({self.linger_ms + self.request_timeout_ms}), as in Kafka.",
        )
        object.__setattr__(self, "acks_id", _ACKS[self.acks])
        object.__setattr__(self, "compression", _COMPRESSION[self.compression_type])
        object.__setattr__(self, "idempotent", self._resolve_idempotence())

    def _resolve_idempotence(self) -> bool:
        wanted = self.enable_idempotence
        _require(
            wanted in (None, True, False), f"enable_idempotence must be a bool, not {wanted!r}."
        )
        conflicts = [
            *(["acks must be 'all'"] if self.acks_id != -1 else []),
            *(["retries must be above 0"] if self.retries < 1 else []),
            *(
                ["max_in_flight_requests_per_connection must be at most 5"]
                if self.max_in_flight_requests_per_connection > IDEMPOTENT_IN_FLIGHT_MAX
                else []
            ),
        ]
        if wanted and conflicts:
            raise ValueError(f"enable_idempotence=True needs: {'; '.join(conflicts)}.")
        return wanted is not False and not conflicts


def _require(ok: bool, sentence: str) -> None:
    if not ok:
        raise ValueError(sentence)


# (setting, smallest valid value), checked in this order
_INTEGER_MINIMUMS: Final = (
    ("linger_ms", 0),
    ("batch_size", 1),
    ("retries", 0),
    ("retry_backoff_ms", 0),
    ("request_timeout_ms", 1),
    ("delivery_timeout_ms", 1),
    ("max_in_flight_requests_per_connection", 1),
    ("max_request_size", 1),
    ("buffer_memory", 1),
    ("max_block_ms", 0),
)
