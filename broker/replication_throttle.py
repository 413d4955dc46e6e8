"""The follower's replication throttle for reassignment traffic (Kafka's
follower.replication.throttled.rate and follower.replication.throttled.replicas, KIP-73).

A replica this broker follows is throttled while it is out of the ISR and its topic's
`follower.replication.throttled.replicas` names it (`partition:this broker`, or `*`): a new
replica catching up during a reassignment. In-sync followers are never throttled, so an acks=all
producer never waits on the throttle. The throttled replicas share one `TokenBucket` per broker
at `follower.replication.throttled.rate` bytes/s (this broker's dynamic config, else the
cluster-wide one); the fetcher leaves them out of its requests while the bucket is empty.
"""

from __future__ import annotations

import threading
from typing import Final

from pykraft.metadata_log import MetadataImage
from pykraft.metadata_log.configs import LONG_MAX
from pykraft.metadata_log.records import ConfigResourceType

RATE_KEY: Final = "follower.replication.throttled.rate"
REPLICAS_KEY: Final = "follower.replication.throttled.replicas"
CLUSTER_DEFAULT_BROKER: Final = ""
# How long a burst the bucket may save up: at most this many ms of the rate.
BURST_MS: Final = 1000
# A throttled partition's bytes per fetch: this many ms of the rate, so one answer overshoots
# the rate by little (a first batch above it still comes whole, as Kafka's fetches do).
FETCH_SLICE_MS: Final = 100


class TokenBucket:
    """`rate_bytes_per_s` bytes a second, saving up to `BURST_MS` worth while idle; it starts
    empty. Spending may overdraw it (a fetch's size is known only after it returns); it is
    available again once refilled above zero. Pure arithmetic on the `now_ms` given."""

    def __init__(self, rate_bytes_per_s: int, now_ms: int) -> None:
        assert rate_bytes_per_s > 0
        self.rate_bytes_per_s = rate_bytes_per_s
        self._capacity_bytes = rate_bytes_per_s * BURST_MS / 1000
        self._tokens_bytes = 0.0
        self._updated_ms = now_ms

    def _refill(self, now_ms: int) -> None:
        elapsed_ms = max(now_ms - self._updated_ms, 0)
        refilled = self._tokens_bytes + elapsed_ms * self.rate_bytes_per_s / 1000
        self._tokens_bytes = min(refilled, self._capacity_bytes)
        self._updated_ms = max(now_ms, self._updated_ms)

    def available(self, now_ms: int) -> bool:
        self._refill(now_ms)
        return self._tokens_bytes > 0

    def wait_ms(self, now_ms: int) -> int:
        """How long until `available` (0 if it is now)."""
        self._refill(now_ms)
        if self._tokens_bytes > 0:
            return 0
        return int(-self._tokens_bytes * 1000 / self.rate_bytes_per_s) + 1

    def spend(self, size_bytes: int, now_ms: int) -> None:
        self._refill(now_ms)
        self._tokens_bytes -= size_bytes


def _rate_bytes_per_s(image: MetadataImage, broker_id: int) -> int:
    for name in (str(broker_id), CLUSTER_DEFAULT_BROKER):
        value = image.configs.get(ConfigResourceType.BROKER, name).get(RATE_KEY)
        if value is not None:
            return int(value)
    return LONG_MAX


class FollowerThrottle:
    """Which followed replicas are throttled, and the one bucket they share; thread-safe (every
    fetcher thread of the broker uses it)."""

    def __init__(self, broker_id: int) -> None:
        self._broker_id = broker_id
        self._lock = threading.Lock()
        self._bucket: TokenBucket | None = None

    def throttled(self, image: MetadataImage, topic: str, partition: int, in_sync: bool) -> bool:
        if in_sync:
            return False
        listed = image.configs.get(ConfigResourceType.TOPIC, topic).get(REPLICAS_KEY, "")
        items = listed.split(",")
        return items == ["*"] or f"{partition}:{self._broker_id}" in items

    def _current(self, image: MetadataImage, now_ms: int) -> TokenBucket | None:
        """The bucket at the configured rate (a new, empty one when the rate changed); None when
        the rate is unlimited. Called under the lock."""
        rate = _rate_bytes_per_s(image, self._broker_id)
        if rate >= LONG_MAX:
            self._bucket = None
        elif self._bucket is None or self._bucket.rate_bytes_per_s != rate:
            self._bucket = TokenBucket(rate, now_ms)
        return self._bucket

    def fetch_bytes_max(self, image: MetadataImage, now_ms: int) -> int | None:
        """The bytes a throttled partition may ask for in the next fetch, 0 while the bucket is
        empty, None when no rate is set."""
        with self._lock:
            bucket = self._current(image, now_ms)
            if bucket is None:
                return None
            if not bucket.available(now_ms):
                return 0
            return max(bucket.rate_bytes_per_s * FETCH_SLICE_MS // 1000, 1)

    def wait_ms(self, now_ms: int) -> int:
        """How long until throttled partitions may fetch again (0: now, or no bucket)."""
        with self._lock:
            return 0 if self._bucket is None else self._bucket.wait_ms(now_ms)

    def spend(self, size_bytes: int, now_ms: int) -> None:
        with self._lock:
            if self._bucket is not None:
                self._bucket.spend(size_bytes, now_ms)
