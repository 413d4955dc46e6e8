"""Kafka's default partitioner: murmur2 of the key bytes, sticky partitions for null keys.

`murmur2` reproduces Java's `Utils.murmur2` bit for bit (seed 0x9747b28c, 32-bit arithmetic,
signed result), so a keyed record lands in the partition a Kafka client would pick.
"""

from __future__ import annotations

import random
import threading

from pykraft.proto import extensions

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK32 = 0xFFFFFFFF


def murmur2_python(data: bytes) -> int:
    """Java's `Utils.murmur2(data)`: a signed 32-bit hash. The compiled `_murmur2.murmur2`
    returns the same hash."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


# Compiled unless disabled or not built (pykraft.proto.extensions).
murmur2 = murmur2_python
_compiled = extensions.load("pykraft.client.producer._murmur2")
if _compiled is not None:
    murmur2 = _compiled.murmur2


def to_positive(number: int) -> int:
    """Java's `Utils.toPositive`: clears the sign bit (not abs, so MIN_VALUE maps to 0)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null key."""
    assert num_partitions > 0
    return to_positive(murmur2(key)) % num_partitions


class DefaultPartitioner:
    """Keyed records by murmur2; null keys stick to one partition per topic until the
    accumulator starts a new batch for it (`on_new_batch`), so they fill batches quickly."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        # Each topic's sticky partition: changed under the lock, read without it (one dict read,
        # atomic in CPython) by `partition` and by the compiled send path.
        self.sticky: dict[str, int] = {}
        self._lock = threading.Lock()

    def partition(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        # One dict read, atomic in CPython, without the lock: the per-record fast path. A
        # concurrent on_new_batch may make it the previous choice, as it would a moment earlier.
        current = self.sticky.get(topic)
        if current is not None and current < num_partitions:
            return current
        with self._lock:
            current = self.sticky.get(topic)
            if current is None or current >= num_partitions:
                current = self._rng.randrange(num_partitions)
                self.sticky[topic] = current
            return current

    def on_new_batch(self, topic: str, previous: int, num_partitions: int) -> None:
        """A batch for `previous` just started: move the topic's sticky partition elsewhere."""
        with self._lock:
            if self.sticky.get(topic, previous) != previous or num_partitions < 2:
                return
            choice = self._rng.randrange(num_partitions - 1)
            self.sticky[topic] = choice if choice < previous else choice + 1
