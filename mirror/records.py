"""The records of the mirror's topics on the target, in MM2's byte layouts, so MM2's tools
(RemoteClusterUtils, the OffsetSync and Checkpoint formatters) read them as MM2's own.

- OffsetSync: key (topic STRING, partition INT32), value (upstream offset INT64, downstream
  offset INT64): the source record at `upstream` was written to the target at `downstream`.
- Checkpoint: key (group STRING, topic STRING, partition INT32), value (version INT16 = 0,
  upstream offset INT64, downstream offset INT64, metadata STRING): the group's committed
  offset on the source and its translation on the target; the topic is the target's name.

STRING is Kafka's protocol string: an INT16 byte length, then UTF-8. Integers are big-endian.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from pykraft.client import TopicPartition

CHECKPOINT_VERSION: Final = 0
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_OFFSETS: Final = struct.Struct(">qq")


@dataclass(frozen=True, order=True)
class OffsetSync:
    """Where one source record landed on the target (MM2's OffsetSync)."""

    tp: TopicPartition  # the source partition
    upstream: int
    downstream: int

    @property
    def delta(self) -> int:
        """How far the target offset is from the source one; it changes where the source has
        a gap (compaction, retention, a record never mirrored)."""
        return self.downstream - self.upstream

    def key(self) -> bytes:
        return _string(self.tp.topic) + _INT32.pack(self.tp.partition)

    def value(self) -> bytes:
        return _OFFSETS.pack(self.upstream, self.downstream)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> OffsetSync:
        """ValueError for bytes that are not an OffsetSync."""
        topic, position = _read_string(key, 0)
        (partition,) = _unpack(_INT32, key, position, exact=True)
        upstream, downstream = _unpack(_OFFSETS, value, 0, exact=True)
        return cls(TopicPartition(topic, partition), upstream, downstream)


@dataclass(frozen=True)
class Checkpoint:
    """A source group's committed offset and its translation (MM2's Checkpoint); `tp` is the
    target's topic and partition."""

    group: str
    tp: TopicPartition
    upstream: int
    downstream: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.tp.topic) + _INT32.pack(self.tp.partition)

    def value(self) -> bytes:
        offsets = _OFFSETS.pack(self.upstream, self.downstream)
        return _INT16.pack(CHECKPOINT_VERSION) + offsets + _string(self.metadata)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Checkpoint:
        """ValueError for bytes that are not a version-0 Checkpoint."""
        group, position = _read_string(key, 0)
        topic, position = _read_string(key, position)
        (partition,) = _unpack(_INT32, key, position, exact=True)
        (version,) = _unpack(_INT16, value, 0)
        if version != CHECKPOINT_VERSION:
            raise ValueError(f"checkpoint version {version} is not {CHECKPOINT_VERSION}")
        upstream, downstream = _unpack(_OFFSETS, value, _INT16.size)
        metadata, end = _read_string(value, _INT16.size + _OFFSETS.size)
        if end != len(value):
            raise ValueError(f"{len(value) - end} bytes after a checkpoint's value")
        return cls(group, TopicPartition(topic, partition), upstream, downstream, metadata)


def _string(text: str) -> bytes:
    data = text.encode()
    return _INT16.pack(len(data)) + data


def _read_string(data: bytes, position: int) -> tuple[str, int]:
    (length,) = _unpack(_INT16, data, position)
    start = position + _INT16.size
    if length < 0 or start + length > len(data):
        raise ValueError(f"a string of {length} bytes at {start} does not fit in {len(data)}")
    return data[start : start + length].decode(), start + length


def _unpack(
    layout: struct.Struct, data: bytes, position: int, *, exact: bool = False
) -> tuple[int, ...]:
    end = position + layout.size
    if end > len(data) or (exact and end != len(data)):
        raise ValueError(f"expected {layout.size} bytes at {position} of {len(data)}")
    return layout.unpack_from(data, position)
