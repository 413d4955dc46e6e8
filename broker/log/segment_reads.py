"""The read side of one segment (mixed into `LogSegment`): walking batch headers, finding
positions by offset and by timestamp, and reading whole batches as bytes or as a range of the
file. Readers may run on other threads at the same time as `append`: they stop at `size`, which
`append` raises only once the bytes and index entries are in place, and they read with pread,
never moving the cursor the writer uses.

The headers of the latest batches appended (`recent`, at most RECENT_BATCHES_MAX) stay in memory
while the segment is active: a read at the tail of the log, a follower's or a caught-up
consumer's, finds its batches without reading a header from the file."""

from __future__ import annotations

import errno
import os
from bisect import bisect_left
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from pykraft.broker.log.files import FileRange, read_at
from pykraft.broker.log.index import OffsetIndex, TimeIndex
from pykraft.broker.log.open_files import CachedFile
from pykraft.proto.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    CorruptBatchError,
    decode_batch,
    verify_batch,
)

_SCAN_BYTES: Final = 1 << 16  # bytes read at a time when walking batch headers
assert _SCAN_BYTES >= HEADER_SIZE
# How many of the latest batches' headers an active segment keeps in memory: enough for what a
# follower's or a caught-up consumer's fetch finds since its last one, about 12 KiB a partition.
RECENT_BATCHES_MAX: Final = 32

# (position, header) of a batch.
Located = tuple[int, BatchHeader]


def _position(located: Located) -> int:
    return located[0]


def _last_offset(located: Located) -> int:
    return located[1].last_offset


class SegmentReads:
    """The reads of `LogSegment`, over the files and the published size it keeps."""

    log_path: Path
    offset_index: OffsetIndex
    time_index: TimeIndex
    size: int  # published bytes: readers never look past this
    # The latest batches, in order, up to the end of the segment (replaced, never mutated, so
    # a reader's copy stays whole); empty when not known.
    recent: tuple[Located, ...]
    _file: CachedFile

    def _iter_batches(
        self, position: int, end: int, *, verify: bool
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from `position` up to `end`, read in chunks.
        Raises CorruptBatchError at a batch that is torn (runs past `end`) or fails to parse,
        or with `verify` whose CRC is wrong."""
        chunk = b""
        chunk_start = position
        while position < end:
            relative = position - chunk_start
            if len(chunk) - relative < HEADER_SIZE:
                chunk = self._read_at(min(_SCAN_BYTES, end - position), position)
                chunk_start, relative = position, 0
            header = BatchHeader.parse(chunk, relative)
            if position + header.size_bytes > end:
                raise CorruptBatchError(f"{self.log_path}: batch at {position} is torn")
            if verify:
                if relative + header.size_bytes > len(chunk):
                    chunk = self._read_at(max(_SCAN_BYTES, header.size_bytes), position)
                    chunk_start, relative = position, 0
                verify_batch(chunk, relative)
            yield position, header
            position += header.size_bytes

    def _read_at(self, size: int, position: int) -> bytes:
        with self._file.borrow() as fd:
            return read_at(fd, size, position)

    def _headers(self, position: int, end: int) -> Iterator[Located]:
        """(position, header) of each batch from `position` (a batch start) up to `end`: from
        `recent` when it holds that batch, else read from the file."""
        recent = self.recent
        if recent and position >= recent[0][0]:
            slot = bisect_left(recent, position, key=_position)
            if slot < len(recent) and recent[slot][0] == position:
                for located in recent[slot:]:
                    if located[0] >= end:
                        return
                    yield located
                return
        yield from self._iter_batches(position, end, verify=False)

    def find_position(self, offset: int) -> int | None:
        """Position of the first batch whose last offset is >= `offset`, or None if the segment
        has none (up to `size`)."""
        end = self.size
        recent = self.recent
        if recent and offset >= recent[0][1].base_offset:  # no batch before these reaches it
            slot = bisect_left(recent, offset, key=_last_offset)
            if slot == len(recent) or recent[slot][0] >= end:
                return None
            return recent[slot][0]
        start = self.offset_index.lookup(offset).position
        for position, header in self._iter_batches(start, end, verify=False):
            if header.last_offset >= offset:
                return position
        return None

    def read(
        self, position: int, *, bytes_max: int, upper_offset: int
    ) -> tuple[bytes, int, int] | None:
        """Whole batches from `position` (a batch start): (data, base offset of the first,
        offset after the last), the batches `batch_span` picks; None if it picks none."""
        span = self.batch_span(position, bytes_max=bytes_max, upper_offset=upper_offset)
        if span is None:
            return None
        length, first_offset, next_offset = span
        return self.read_bytes(position, length), first_offset, next_offset

    def read_bytes(self, position: int, length: int) -> bytes:
        """`length` bytes of the `.log` file from `position` (pread: see the module docstring)."""
        return self._read_at(length, position)

    def batch_span(
        self, position: int, *, bytes_max: int, upper_offset: int
    ) -> tuple[int, int, int] | None:
        """Which whole batches from `position` (a batch start) a read returns, walking their
        headers only: (length in bytes, base offset of the first, offset after the last). The
        first batch counts even if larger than `bytes_max`; later ones only while the total
        stays within it. No batch whose last offset is >= `upper_offset` counts; None if the
        first one is such a batch."""
        length, first_offset, next_offset = 0, -1, -1
        for _, header in self._headers(position, self.size):
            if header.last_offset >= upper_offset:
                break
            if length and length + header.size_bytes > bytes_max:
                break
            if not length:
                first_offset = header.base_offset
            length, next_offset = length + header.size_bytes, header.next_offset
        return (length, first_offset, next_offset) if length else None

    def open_range(self, position: int, length: int) -> FileRange | bytes:
        """`length` bytes of the `.log` file from `position` on a duplicate of its descriptor
        (see FileRange for why a duplicate), which the caller closes; the bytes themselves
        when the process is out of descriptors."""
        try:
            with self._file.borrow() as fd:
                return FileRange(os.dup(fd), position, length)
        except OSError as error:
            if error.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            return self.read_bytes(position, length)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `start_offset` whose timestamp is
        >= `timestamp`, or None. Uses the time index to skip ahead, then decodes one batch.
        Raises BatchError if that batch's records do not decode."""
        entry = self.time_index.lookup(timestamp)
        start = self.offset_index.lookup(entry.offset).position
        for position, header in self._iter_batches(start, self.size, verify=False):
            if header.max_timestamp < timestamp or header.last_offset < start_offset:
                continue
            for record in decode_batch(self._read_at(header.size_bytes, position)):
                if record.timestamp >= timestamp and record.offset >= start_offset:
                    return record.offset, record.timestamp
        return None
