"""The sparse offset and time indexes of a segment, in Kafka's byte format.

- `.index` (OffsetIndex): 8-byte entries, a 4-byte offset relative to the segment's base offset
  and the 4-byte file position of a batch, big-endian. Entry (O, P) says the batch whose last
  offset is O starts at byte P: a batch holding any offset above O starts at P or later.
- `.timeindex` (TimeIndex): 12-byte entries, an 8-byte timestamp and a 4-byte relative offset.
  Entry (T, O) says that T is the largest timestamp of the segment up to the batch whose last
  offset is O, so every record with a timestamp above T comes after O. Timestamps increase
  strictly from entry to entry.

Both are sparse: the segment adds an entry every `index.interval.bytes` of appended batches.
Kafka preallocates the files and trims them when the segment rolls; we simply append, so a file
is always exactly its entries and Kafka's tools read it as a trimmed one. Neither file has a
checksum: a file that fails the sanity checks raises IndexCorruptError and the segment rebuilds
it from the log, as Kafka does. Entries are read on first use (Kafka's LazyIndex), then live in
memory as well, searched by bisection.

New entries reach the file on `flush`, `close` or `truncate_entries`, not on every append (Kafka
writes its index through an mmap, with no system call per entry). The file is open only while
it is written (Kafka's LazyIndex closes idle indexes): a broker with many segments holds no
descriptor per index. An index file that lacks its
newest entries is still correct, only sparser, and the segments a crash could leave that way lie
after the recovery point, whose indexes recovery rebuilds from the log anyway.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import ClassVar, Final, NamedTuple, Self

from pykraft.broker.log.files import read_whole, write_all
from pykraft.proto.record_batch import NO_TIMESTAMP

log = logging.getLogger(__name__)

_INT32_MAX: Final = (1 << 31) - 1
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)


class IndexCorruptError(ValueError):
    """An index file fails its sanity checks; the segment must rebuild it from the log."""


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class _SparseIndex:
    """Entries (key, value) with keys increasing, kept in a file and in two arrays.

    Lazy, as Kafka's LazyIndex: `load` reads only the file's size and last entry (what opening
    a segment needs); the entries are read on first use (a lookup, an append, a truncation),
    so a broker start-up reads no index it does not serve from."""

    ENTRY: ClassVar[struct.Struct]

    def __init__(self, path: Path, base_offset: int, entries_max: int) -> None:
        assert base_offset >= 0 and entries_max >= 0
        self.path = path
        self.base_offset = base_offset
        self.entries_max = entries_max
        self._keys = array("q")
        self._values = array("q")
        self._unwritten = bytearray()  # packed entries not yet in the file
        self._synced = False  # whether the file is durable as it is (set by load and flush)
        self._stale_file = False  # whether the file is to be emptied at the next write-out
        # Until the entries are read (`_loaded`): how many the file holds, and the last one.
        self._loaded = True
        self._stored_count = 0
        self._stored_last: tuple[int, int] | None = None
        self._loading = threading.Lock()  # readers may be the first users, several at once

    @classmethod
    def create(cls, path: Path, base_offset: int, entries_max: int) -> Self:
        """A new, empty index; an existing file at `path` is emptied."""
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _CLOEXEC, 0o644))
        return cls(path, base_offset, entries_max)

    @classmethod
    def replacing(cls, path: Path, base_offset: int, entries_max: int) -> Self:
        """A new, empty index for one rebuilt from the log: the file at `path` (stale, or
        missing) is emptied (or created) when the index is first written out, not now. A
        crash before that leaves the stale file beside a segment that recovery rebuilds
        again, since nothing made it durable."""
        index = cls(path, base_offset, entries_max)
        index._stale_file = True
        return index

    @classmethod
    def load(cls, path: Path, base_offset: int, entries_max: int) -> Self:
        """The index stored at `path` (empty if there is no file), its entries read on first
        use; IndexCorruptError if the file is not a whole number of entries or its last entry
        is impossible (entries found out of order later are cut off: see `_entries`)."""
        try:
            fd = os.open(path, os.O_RDONLY | _CLOEXEC)
        except FileNotFoundError:
            return cls.create(path, base_offset, entries_max)
        try:
            size = os.fstat(fd).st_size
            if size % cls.ENTRY.size:
                raise IndexCorruptError(f"{path}: {size} bytes is not a whole number of entries")
            last = os.pread(fd, cls.ENTRY.size, size - cls.ENTRY.size) if size else b""
        finally:
            os.close(fd)
        index = cls(path, base_offset, entries_max)
        if size:
            index._loaded = False
            index._stored_count = size // cls.ENTRY.size
            index._stored_last = index._from_stored(*cls.ENTRY.unpack(last))
        index._synced = True  # as found on disk: a later flush need not fsync it unchanged
        return index

    def _entries(self) -> tuple[array[int], array[int]]:
        """The keys and values, read from the file on first use. Entries out of order there
        (damage) are cut off the file, with what follows them: a sorted prefix is still a
        correct sparse index, and reads scan forward from it."""
        if self._loaded:
            return self._keys, self._values
        with self._loading:
            if not self._loaded:
                data = read_whole(self.path)[: self._stored_count * self.ENTRY.size]
                for count, stored in enumerate(self.ENTRY.iter_unpack(data)):
                    key, value = self._from_stored(*stored)
                    if self._keys and not self._follows(key, value):
                        log.error("%s: entry %d is out of order; cut there", self.path, count)
                        os.truncate(self.path, count * self.ENTRY.size)
                        self._synced = False
                        break
                    self._values.append(value)
                    self._keys.append(key)
                self._loaded = True
        return self._keys, self._values

    @property
    def entry_count(self) -> int:
        return len(self._keys) if self._loaded else self._stored_count

    @property
    def is_full(self) -> bool:
        return self.entry_count >= self.entries_max

    def _last(self) -> tuple[int, int] | None:
        """The last entry, without reading the file."""
        if not self._loaded:
            return self._stored_last
        return (self._keys[-1], self._values[-1]) if self._keys else None

    def _write_entry(self, key: int, value: int, *, allow_full: bool = False) -> None:
        """Adds an entry in memory; it reaches the file with the next `write_out`.

        Values go in before keys and entries leave only under the log's exclusive lock, so a
        reader bisecting the keys concurrently always finds the value of its slot."""
        self._entries()
        assert allow_full or not self.is_full, f"{self.path} is full"
        assert not self._keys or self._follows(key, value), (key, value, self.path)
        self._unwritten += self.ENTRY.pack(*self._to_stored(key, value))
        self._values.append(value)
        self._keys.append(key)

    def write_out(self) -> None:
        """Appends the entries added since the last call to the file (the file then holds
        exactly the entries). On OSError the file may hold part of them: `truncate_entries`
        cuts it back."""
        if self._unwritten or self._stale_file:
            self._synced = False
            flags = os.O_WRONLY | os.O_APPEND | _CLOEXEC
            if self._stale_file:
                flags |= os.O_CREAT | os.O_TRUNC
            fd = os.open(self.path, flags, 0o644)
            self._stale_file = False
            try:
                write_all(fd, self._unwritten)
            finally:
                os.close(fd)
            self._unwritten.clear()

    def truncate_entries(self, count: int) -> None:
        """Keeps the first `count` entries, and cuts the file to them (also removing the
        partial entry a failed write may have left)."""
        self._entries()
        assert 0 <= count <= len(self._keys), (count, len(self._keys))
        written = len(self._keys) - len(self._unwritten) // self.ENTRY.size
        self._synced = False
        if count <= written:
            self._unwritten.clear()
            kept = count
        else:
            del self._unwritten[(count - written) * self.ENTRY.size :]
            kept = written
        if not self._stale_file:  # else nothing of the file counts: emptied on write-out
            os.truncate(self.path, kept * self.ENTRY.size)
        del self._keys[count:]
        del self._values[count:]

    def flush(self) -> None:
        """Writes out and fsyncs; nothing when the file is durable as it is (an idle index)."""
        self.write_out()
        if self._synced:
            return
        fd = os.open(self.path, os.O_RDONLY | _CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._synced = True

    def close(self) -> None:
        """Writes out what is unwritten; the file is not held open between writes."""
        self.write_out()

    def _follows(self, key: int, value: int) -> bool:
        raise NotImplementedError

    def _to_stored(self, key: int, value: int) -> tuple[int, int]:
        raise NotImplementedError

    def _from_stored(self, first: int, second: int) -> tuple[int, int]:
        raise NotImplementedError

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        assert 0 <= relative <= _INT32_MAX, f"offset {offset} is outside segment {self.path}"
        return relative

    def _absolute(self, relative: int) -> int:
        if relative < 0:
            raise IndexCorruptError(f"{self.path}: negative relative offset {relative}")
        return self.base_offset + relative


class OffsetIndex(_SparseIndex):
    """Offset -> file position of the batch holding it (Kafka's OffsetIndex)."""

    ENTRY = struct.Struct(">ii")  # relative offset, position

    def lookup(self, offset: int) -> OffsetPosition:
        """The entry with the largest offset <= `offset`, or (base offset, 0) if there is none:
        the batch holding `offset` starts at that position or later."""
        keys, values = self._entries()
        slot = bisect_right(keys, offset) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(keys[slot], values[slot])

    def last_entry(self) -> OffsetPosition:
        last = self._last()
        return OffsetPosition(self.base_offset, 0) if last is None else OffsetPosition(*last)

    def append(self, offset: int, position: int) -> None:
        """Adds (last offset of a batch, its position); both above the previous entry's."""
        self._write_entry(offset, position)

    def truncate_to(self, offset: int) -> None:
        """Drops the entries for batches that end at `offset` or later."""
        self.truncate_entries(bisect_left(self._entries()[0], offset))

    def _follows(self, key: int, value: int) -> bool:
        return key > self._keys[-1] and value > self._values[-1]

    def _to_stored(self, key: int, value: int) -> tuple[int, int]:
        assert 0 <= value <= _INT32_MAX, f"position {value} does not fit the index"
        return self._relative(key), value

    def _from_stored(self, first: int, second: int) -> tuple[int, int]:
        if second < 0:
            raise IndexCorruptError(f"{self.path}: negative position {second}")
        return self._absolute(first), second


class TimeIndex(_SparseIndex):
    """Timestamp -> offset after which later timestamps lie (Kafka's TimeIndex)."""

    ENTRY = struct.Struct(">qi")  # timestamp, relative offset

    def lookup(self, timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= `timestamp`, or (-1, base offset): records
        with a timestamp >= `timestamp` lie in that entry's batch or after it."""
        keys, values = self._entries()
        slot = bisect_right(keys, timestamp) - 1
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(keys[slot], values[slot])

    def last_entry(self) -> TimestampOffset:
        last = self._last()
        if last is None:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(*last)

    def maybe_append(self, timestamp: int, offset: int, *, allow_full: bool = False) -> None:
        """Adds (timestamp, offset) if `timestamp` is above the last entry's, as Kafka does;
        `offset` may not be below the last entry's. `allow_full` is for the last entry a
        segment writes when it stops being active (its largest timestamp, kept across
        restarts), which Kafka also writes past the limit."""
        last = self.last_entry()
        assert offset >= last.offset, (offset, last, self.path)
        if timestamp > last.timestamp:
            self._write_entry(timestamp, offset, allow_full=allow_full)

    def truncate_to(self, offset: int) -> None:
        """Drops the entries that point at `offset` or later."""
        self.truncate_entries(bisect_left(self._entries()[1], offset))

    def _follows(self, key: int, value: int) -> bool:
        return key > self._keys[-1] and value >= self._values[-1]

    def _to_stored(self, key: int, value: int) -> tuple[int, int]:
        return key, self._relative(value)

    def _from_stored(self, first: int, second: int) -> tuple[int, int]:
        return first, self._absolute(second)
