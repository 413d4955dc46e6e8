"""One segment of a partition log: the `.log` file of whole batches and its two sparse indexes.

Files are named by the segment's base offset, zero-padded to 20 digits, as in Kafka
(`segment_names`): `00000000000000000000.log`, `.index`, `.timeindex`. The `.log` file is a
plain concatenation of RecordBatch v2 batches exactly as the log appended them, so Kafka's
tools can read it.

Who may call what:
- The partition log serialises every mutation (`append`, `truncate_to`, `rollback`, `recover`,
  `close`, ...). Readers (`read`, `find_position`, `find_offset_by_timestamp`: `segment_reads`,
  mixed in) may run on other threads at the same time as `append`: they stop at `size`, which
  `append` raises only once the bytes and index entries are in place, and they read with
  pread, never moving the cursor the writer uses. Truncation, rollback and closing must hold
  the log's exclusive lock.
- `load` trusts the bytes (segments below the recovery point, or after a clean shutdown) and
  only scans the tail behind the last index entry; `recover` verifies every batch and cuts the
  file at the first one that is torn, corrupt or out of order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Final

from pykraft.broker.log.config import LogConfig
from pykraft.broker.log.files import writev_all
from pykraft.broker.log.index import IndexCorruptError, OffsetIndex, TimeIndex
from pykraft.broker.log.open_files import CachedFile
from pykraft.broker.log.segment_names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    file_name,
)
from pykraft.broker.log.segment_reads import RECENT_BATCHES_MAX, SegmentReads
from pykraft.proto.record_batch import (
    HEADER_SIZE,
    NO_TIMESTAMP,
    BatchHeader,
    Buffer,
    CorruptBatchError,
)

_INT32_MAX: Final = (1 << 31) - 1


@dataclass(frozen=True)
class SegmentInfo:
    """An immutable description of a segment at one moment (for retention and the cleaner).
    `last_offset` is base_offset - 1 for an empty segment; `largest_timestamp` is -1 when no
    batch has a timestamp."""

    base_offset: int
    path: Path
    size_bytes: int
    last_offset: int
    largest_timestamp: int


@dataclass(frozen=True)
class SegmentMark:
    """What `rollback` restores: the segment as it was before a failed append."""

    size: int
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    first_batch_max_timestamp: int | None
    bytes_since_index_entry: int
    index_entries: int
    time_index_entries: int


class IndexOpening(Enum):
    """How a segment opens its indexes: CREATE empty files (a new segment), LOAD the files
    (trusted bytes), or REBUILD them from the log (recovery: the stale files are emptied only
    when first written out, which saved two truncations per log recovered at start-up)."""

    CREATE = "create"
    LOAD = "load"
    REBUILD = "rebuild"


class LogSegment(SegmentReads):
    """A `.log` file with its offset and time indexes (Kafka's LogSegment); its reads are
    `SegmentReads`'."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        indexes: IndexOpening,
        suffix: str = "",
    ) -> None:
        """Opens (creating if needed) the log file and the indexes as `indexes` says; use
        `create`, `load` or `recovered` rather than this. `suffix`
        follows every file name (".cleaned", ".swap" while the cleaner swaps segments). The
        log file's descriptor is open only while in use (`open_files`); the indexes keep their
        entries in memory and open their files only to write them."""
        self.base_offset = base_offset
        self.log_path = directory / (file_name(base_offset, LOG_SUFFIX) + suffix)
        self.index_path = directory / (file_name(base_offset, INDEX_SUFFIX) + suffix)
        self.time_index_path = directory / (file_name(base_offset, TIME_INDEX_SUFFIX) + suffix)
        self.configure(config)
        self._index_entries_max = config.segment_index_bytes // OffsetIndex.ENTRY.size
        self._time_index_entries_max = config.segment_index_bytes // TimeIndex.ENTRY.size
        # Append mode: writes land at the end, which truncation and rollback keep at `size`.
        self._file = CachedFile.create(self.log_path)
        self._synced = False  # whether the `.log` file is durable as it is (load and flush)
        try:
            self.offset_index, self.time_index = self._open_indexes(indexes)
        except BaseException:
            self._file.close()
            raise
        self._reset_state(size=0)

    def _reset_state(self, size: int) -> None:
        self.size = size  # published bytes: readers never look past this
        self.next_offset = self.base_offset  # one past the last offset of the last batch
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self.first_batch_max_timestamp: int | None = None  # what segment.ms counts from
        self._bytes_since_index_entry = 0
        self.recent = ()

    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig) -> LogSegment:
        """A new, empty segment (any old files under its names are emptied)."""
        segment = cls(directory, base_offset, config, indexes=IndexOpening.CREATE)
        segment._truncate_file(0)
        return segment

    @classmethod
    def load(
        cls, directory: Path, base_offset: int, config: LogConfig, names: Collection[str]
    ) -> LogSegment:
        """A segment whose bytes are trusted; `names` are the directory's files (listed once
        for all its segments). Reads the indexes and scans the batches behind their last
        entry; raises IndexCorruptError when an index is missing or does not fit the log (the
        caller then recovers the segment, rebuilding both) and CorruptBatchError when the tail
        does not parse."""
        index_names = (
            file_name(base_offset, INDEX_SUFFIX),
            file_name(base_offset, TIME_INDEX_SUFFIX),
        )
        missing = [name for name in index_names if name not in names]
        segment = cls(directory, base_offset, config, indexes=IndexOpening.LOAD)
        try:
            if missing:
                raise IndexCorruptError(f"{directory}: {missing} missing")
            segment._load_tail()
        except (CorruptBatchError, IndexCorruptError):
            segment.close_files()
            raise
        segment._synced = True  # trusted bytes were flushed before (recovery point, close)
        return segment

    @classmethod
    def recovered(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        on_batch: Callable[[BatchHeader], None],
        *,
        suffix: str = "",
    ) -> tuple[LogSegment, int]:
        """The segment after `recover` (indexes rebuilt), with the bytes it cut off."""
        segment = cls(directory, base_offset, config, indexes=IndexOpening.REBUILD, suffix=suffix)
        try:
            return segment, segment.recover(on_batch)
        except BaseException:
            segment.close_files()
            raise

    def _open_indexes(self, opening: IndexOpening) -> tuple[OffsetIndex, TimeIndex]:
        offset_opener, time_opener = {
            IndexOpening.CREATE: (OffsetIndex.create, TimeIndex.create),
            IndexOpening.LOAD: (OffsetIndex.load, TimeIndex.load),
            IndexOpening.REBUILD: (OffsetIndex.replacing, TimeIndex.replacing),
        }[opening]
        offsets = offset_opener(self.index_path, self.base_offset, self._index_entries_max)
        try:
            times = time_opener(
                self.time_index_path, self.base_offset, self._time_index_entries_max
            )
        except BaseException:
            offsets.close()
            raise
        return offsets, times

    def _load_tail(self) -> None:
        """Sets the in-memory state from the indexes' last entries and the batches after the
        last offset index entry, checking that the indexes agree with the log."""
        file_size = self._file_size()
        entry = self.offset_index.last_entry()
        time_entry = self.time_index.last_entry()
        self._reset_state(size=0)
        self.max_timestamp, self.offset_of_max_timestamp = time_entry
        if self.offset_index.entry_count:
            if entry.position >= file_size:
                raise IndexCorruptError(f"{self.index_path}: entry past the end of the log")
            header = BatchHeader.parse(self._read_at(HEADER_SIZE, entry.position))
            if header.last_offset != entry.offset:
                raise IndexCorruptError(f"{self.index_path}: entry {entry} does not match log")
        for _, header in self._iter_batches(entry.position, file_size, verify=False):
            self._track(header)
            self._bytes_since_index_entry += header.size_bytes
        if self.time_index.entry_count and time_entry.offset >= self.next_offset:
            raise IndexCorruptError(f"{self.time_index_path}: entry past the end of the log")
        if file_size:
            first = BatchHeader.parse(self._read_at(HEADER_SIZE, 0))
            self.first_batch_max_timestamp = first.max_timestamp
        self.size = file_size

    def recover(self, on_batch: Callable[[BatchHeader], None]) -> int:
        """Verifies every batch, rebuilds both indexes and cuts the file at the first batch that
        is torn, corrupt (magic, length, CRC) or whose offsets do not increase. Calls
        `on_batch` for each good batch. Returns the number of bytes cut off. The indexes are
        empty (`recovered` created them so: emptying them again cost four system calls per
        log recovered at start-up)."""
        assert not (self.offset_index.entry_count or self.time_index.entry_count), self.log_path
        self._reset_state(size=0)
        file_size = self._file_size()
        valid_bytes = 0
        try:
            for position, header in self._iter_batches(0, file_size, verify=True):
                if header.base_offset < self.next_offset or not self._fits(header.last_offset):
                    break
                self._index_batch(position, header)
                on_batch(header)
                valid_bytes = position + header.size_bytes
        except CorruptBatchError:
            pass
        if valid_bytes < file_size:
            self._truncate_file(valid_bytes)
        self.size = valid_bytes
        return file_size - valid_bytes

    def _fits(self, offset: int) -> bool:
        """Whether `offset` can be stored relative to the base offset (4 bytes in the index)."""
        return 0 <= offset - self.base_offset <= _INT32_MAX

    def _track(self, header: BatchHeader) -> None:
        """Takes a batch appended (or found) at the end into the in-memory state."""
        if self.first_batch_max_timestamp is None:
            self.first_batch_max_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        self.next_offset = header.next_offset

    def _index_batch(self, position: int, header: BatchHeader) -> None:
        """Kafka's rule: a batch gets index entries once more than index.interval.bytes were
        appended since the last entry; the time index entry carries the largest timestamp so
        far and the last offset of the batch that first reached it."""
        self._track(header)
        if self._bytes_since_index_entry > self._index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += header.size_bytes

    # --- appending ---

    def should_roll(self, *, size_bytes: int, max_timestamp: int, last_offset: int) -> bool:
        """Kafka's rule for a non-empty segment about to take `size_bytes` more: roll when it
        would exceed segment.bytes, an index is full, the offsets would not fit 4 bytes, or
        the new batches' max timestamp is more than segment.ms past the first batch's (Kafka
        counts segment age in record time). Where Kafka falls back to the segment's creation
        time (a first batch without timestamp), we roll by size only."""
        if self.size == 0:
            return False
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        if self.size + size_bytes > self._segment_bytes or not self._fits(last_offset):
            return True
        first = self.first_batch_max_timestamp
        return first is not None and first >= 0 and max_timestamp - first > self._segment_ms

    def configure(self, config: LogConfig) -> None:
        """Sets the limits `should_roll` and `append` apply (they may change at run time)."""
        self._segment_bytes = config.segment_bytes
        self._segment_ms = config.segment_ms
        self._index_interval_bytes = config.index_interval_bytes

    def append(self, pieces: Sequence[Buffer], batches: Sequence[tuple[int, BatchHeader]]) -> None:
        """Writes whole batches at the end, then indexes them: `pieces` are their bytes in
        order, written as they are (one writev, not joined first), and `batches` gives each
        batch's position in their concatenation and its header, offsets increasing from
        `next_offset` on. On OSError the caller must `rollback` to a `mark()` taken before."""
        assert batches and batches[0][1].base_offset >= self.next_offset, (self.next_offset,)
        assert self._fits(batches[-1][1].last_offset), "roll before appending"
        size_bytes = batches[-1][0] + batches[-1][1].size_bytes
        assert size_bytes == sum(len(piece) for piece in pieces), "the pieces are the batches"
        start = self.size
        self._synced = False
        with self._file.borrow() as fd:
            writev_all(fd, pieces)  # append mode: lands at `start`, the end of the file
        added = tuple((start + relative, header) for relative, header in batches)
        for position, header in added:
            self._index_batch(position, header)
        self.recent = (self.recent + added)[-RECENT_BATCHES_MAX:]
        self.size = start + size_bytes  # publish last: readers may now see the batches

    def mark(self) -> SegmentMark:
        return SegmentMark(
            self.size,
            self.next_offset,
            self.max_timestamp,
            self.offset_of_max_timestamp,
            self.first_batch_max_timestamp,
            self._bytes_since_index_entry,
            self.offset_index.entry_count,
            self.time_index.entry_count,
        )

    def rollback(self, mark: SegmentMark) -> None:
        """Puts the segment back as it was at `mark` (file bytes and index entries included)."""
        self.recent = ()
        self._truncate_file(mark.size)
        self.offset_index.truncate_entries(mark.index_entries)
        self.time_index.truncate_entries(mark.time_index_entries)
        self.size = mark.size
        self.next_offset = mark.next_offset
        self.max_timestamp = mark.max_timestamp
        self.offset_of_max_timestamp = mark.offset_of_max_timestamp
        self.first_batch_max_timestamp = mark.first_batch_max_timestamp
        self._bytes_since_index_entry = mark.bytes_since_index_entry

    def truncate_to(self, offset: int) -> int:
        """Drops every batch whose last offset is `offset` or above (a batch goes whole);
        returns the bytes removed."""
        position = self.find_position(offset)
        if position is None:
            return 0
        self.recent = ()
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self._truncate_file(position)
        removed = self.size - position
        self._load_tail()
        return removed

    def on_become_inactive(self) -> None:
        """Kafka writes the largest timestamp into the time index when a segment stops being
        active (roll, close), so it survives a restart without a scan. Its reads are no longer
        at the tail: it forgets the recent batches."""
        self.recent = ()
        self.time_index.maybe_append(
            self.max_timestamp, self.offset_of_max_timestamp, allow_full=True
        )

    def info(self) -> SegmentInfo:
        return SegmentInfo(
            self.base_offset, self.log_path, self.size, self.next_offset - 1, self.max_timestamp
        )

    # --- files ---

    def _file_size(self) -> int:
        with self._file.borrow() as fd:
            return os.fstat(fd).st_size

    def _truncate_file(self, size: int) -> None:
        self._synced = False
        with self._file.borrow() as fd:
            os.ftruncate(fd, size)

    def flush(self, *, fsync: bool = True) -> None:
        """fsyncs the `.log` file (unless unchanged since it was last durable) and indexes;
        without `fsync` only writes the indexes out (the caller syncs the filesystem)."""
        if not fsync:
            self.offset_index.write_out()
            self.time_index.write_out()
            return
        if not self._synced:
            with self._file.borrow() as fd:
                os.fsync(fd)
            self._synced = True
        self.offset_index.flush()
        self.time_index.flush()

    def close_files(self) -> None:
        """Closes the three files (idempotent)."""
        self._file.close()
        self.offset_index.close()
        self.time_index.close()

    def paths(self) -> list[Path]:
        return [self.log_path, self.index_path, self.time_index_path]

    def rename(self, suffix: str) -> None:
        """Renames the three files to their plain names followed by `suffix`, the log file
        last (a `.log` name is what commits a segment); open files stay usable."""
        indexes = ((self.offset_index, INDEX_SUFFIX), (self.time_index, TIME_INDEX_SUFFIX))
        for index, plain_suffix in indexes:
            index.write_out()  # a rebuilt index's file may not exist yet
            target = index.path.with_name(file_name(self.base_offset, plain_suffix) + suffix)
            index.path.rename(target)
            index.path = target
        log_target = self.log_path.with_name(file_name(self.base_offset, LOG_SUFFIX) + suffix)
        self.log_path.rename(log_target)
        self.log_path = log_target
        self._file.path = log_target
        self.index_path = self.offset_index.path
        self.time_index_path = self.time_index.path

    def delete(self) -> None:
        """Closes and removes the files, the log file first: a crash in between leaves index
        files without a log, which the loader removes. The caller fsyncs the directory."""
        self.close_files()
        for path in self.paths():
            path.unlink(missing_ok=True)
