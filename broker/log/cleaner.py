"""Log compaction for topics with cleanup.policy=compact (Kafka's LogCleaner and Cleaner).

One pass over a log (`clean_log`):
1. The cleanable range: the sealed segments from the oldest on, up to (not including) the first
   one that reaches the high watermark or whose newest record is younger than
   min.compaction.lag.ms. The active segment is never cleaned. Kafka stops at the last stable
   offset, which is at most the high watermark: a record a follower may still truncate away
   must never supersede an older one.
2. The offset map: key -> offset of the key's last record in that range, built by reading the
   segment files. It holds at most `offset_map_keys_max` keys; where it fills, the range ends.
3. Consecutive cleanable segments are grouped while their sizes add up to segment.bytes (and
   their batches to what the smaller index may hold), each group is copied into one
   `<base offset>.log.cleaned` file and swapped in by `PartitionLog.replace_segments`, which
   builds its indexes. A lone segment from which nothing would be removed is left alone.

Which records stay (Kafka's rules):
- A keyed record stays only if it is its key's last one in the map. A tombstone (null value)
  that is its key's last stays while its segment's newest timestamp is within
  delete.retention.ms of `now_ms` (Kafka's delete horizon), so consumers have that long to see
  the delete; older, it goes too.
- A keyless record is dropped, as Kafka's cleaner drops it: Kafka refuses keyless records on a
  compacted topic at produce time (INVALID_RECORD), so only a policy change leaves any.
- Records at or above the end of the map stay: nothing is known about later ones.
- Transactional and control batches are copied as they are and their records stay out of the
  map: without a transaction index the cleaner cannot tell committed, aborted and open
  transactions apart. Plain records are compacted as if transactional ones were not there, so
  nothing is lost, but transactional writes are not compacted.

Batches: one whose records all stay is copied byte for byte. Otherwise it is rebuilt from the
survivors at their own offsets, with the same base offset, last offset delta, producer id and
epoch, base sequence, leader epoch, timestamp type and codec (compressed again). A batch left
empty is dropped, except the last batch of each producer id in the scanned range, which stays
empty (Kafka's RETAIN_EMPTY) so that the producer's last epoch and sequence survive.

Ages are record time (a segment's largest timestamp, or its file's modification time when no
batch has one), as retention.ms counts them. Each pass reads the whole cleanable range: there is
no cleaner-offset-checkpoint or min.cleanable.dirty.ratio yet.

Threads: the cleaner reads only sealed segment files, whose bytes never change while they are in
the log except by truncation, so appends and reads go on; only the swap takes the log's locks.
If the log changes under a pass (truncation, retention, another swap), the pass stops; the
groups swapped before that stay swapped.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Final

from pykraft.broker.log.errors import LogError, storage_error
from pykraft.broker.log.index import TimeIndex
from pykraft.broker.log.partition_log import PartitionLog
from pykraft.broker.log.recovery import CLEANED_SUFFIX
from pykraft.broker.log.segment import SegmentInfo
from pykraft.broker.log.segment_names import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, file_name
from pykraft.proto.record_batch import (
    HEADER_SIZE,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    BatchBuilder,
    BatchError,
    BatchHeader,
    CorruptBatchError,
    Record,
    decode_batch,
    verify_batch,
)

logger = logging.getLogger(__name__)

OFFSET_MAP_KEYS_MAX: Final = 1_000_000
"""Keys the offset map holds in one pass, about 128 MiB for short keys (Kafka's default
log.cleaner.dedupe.buffer.size is 128 MiB too)."""

_INT32_MAX: Final = (1 << 31) - 1  # offsets in a segment are stored relative, in 4 bytes


@dataclass(frozen=True)
class CleanResult:
    """What a pass swapped in: segments replaced, their records read and kept, and their bytes
    before and after. Segments left as they were count nowhere."""

    segments_cleaned: int
    records_read: int
    records_kept: int
    bytes_before: int
    bytes_after: int

    def __add__(self, other: CleanResult) -> CleanResult:
        return CleanResult(
            self.segments_cleaned + other.segments_cleaned,
            self.records_read + other.records_read,
            self.records_kept + other.records_kept,
            self.bytes_before + other.bytes_before,
            self.bytes_after + other.bytes_after,
        )


NOTHING_CLEANED: Final = CleanResult(0, 0, 0, 0, 0)


class _Stopped(Exception):
    """The pass stops: the log no longer holds the segments it started from, or the cleaner
    is stopping."""


def clean_log(
    log: PartitionLog, *, now_ms: int, offset_map_keys_max: int = OFFSET_MAP_KEYS_MAX
) -> CleanResult:
    """One compaction pass over `log` (see the module docstring); a no-op unless its
    cleanup.policy includes compact. Raises LogError: KAFKA_STORAGE_ERROR when the log is
    closed, offline or its disk fails; CORRUPT_MESSAGE (or INVALID_RECORD) when a sealed
    segment holds a batch that does not decode."""
    return _clean(log, now_ms=now_ms, keys_max=offset_map_keys_max, should_stop=lambda: False)


def _clean(
    log: PartitionLog, *, now_ms: int, keys_max: int, should_stop: Callable[[], bool]
) -> CleanResult:
    """`clean_log`, checking `should_stop` before each segment it scans and each group."""
    assert keys_max > 0, keys_max
    config = log.config
    if "compact" not in config.cleanup_policy:
        return NOTHING_CLEANED
    horizon_ms = now_ms - config.delete_retention_ms
    batches_max = config.segment_index_bytes // TimeIndex.ENTRY.size
    total = NOTHING_CLEANED
    try:
        cleanable = _cleanable_segments(log, now_ms)
        offset_map = _build_offset_map(log, cleanable, keys_max, should_stop)
        segments = [info for info in cleanable if info.base_offset < offset_map.end_offset]
        for group in _group_segments(segments, offset_map, config.segment_bytes, batches_max):
            if should_stop():
                raise _Stopped("the cleaner is stopping or the log was unregistered")
            total += _clean_group(log, group, offset_map, horizon_ms)
    except _Stopped as stopped:
        logger.info("%s: cleaning stopped: %s", log.directory, stopped)
    except BatchError as error:
        raise LogError(error.error_code, f"cleaning {log.directory}: {error}") from error
    except OSError as error:
        raise storage_error(f"cleaning {log.directory}: {error}") from error
    return total


def _cleanable_segments(log: PartitionLog, now_ms: int) -> list[SegmentInfo]:
    """The oldest sealed segments, wholly below the high watermark and, with
    min.compaction.lag.ms, all older than it."""
    high_watermark = log.high_watermark
    lag_ms = log.config.min_compaction_lag_ms
    cleanable = []
    for info in log.segments()[:-1]:
        if info.last_offset >= high_watermark:
            break
        if lag_ms > 0 and _newest_ms(info) > now_ms - lag_ms:
            break
        cleanable.append(info)
    return cleanable


def _newest_ms(info: SegmentInfo) -> int:
    """The segment's largest record timestamp; its file's modification time when no batch has
    a timestamp (Kafka's fallback, as the log's retention uses)."""
    if info.largest_timestamp != NO_TIMESTAMP:
        return info.largest_timestamp
    try:
        return os.stat(info.path).st_mtime_ns // 1_000_000
    except FileNotFoundError as error:
        raise _Stopped(str(error)) from None


# --- the offset map ---


@dataclass
class _OffsetMap:
    """What the first read of the cleanable range learnt. Every keyed record of a plain batch
    below `end_offset` is in `latest`."""

    end_offset: int = 0
    latest: dict[bytes, int] = field(default_factory=dict)  # key -> offset of its last record
    last_batch_of_producer: dict[int, int] = field(default_factory=dict)  # id -> base offset
    batch_counts: dict[int, int] = field(default_factory=dict)  # segment base offset -> batches
    full: bool = False

    def add(self, header: BatchHeader, data: bytes, keys_max: int) -> None:
        if header.producer_id != NO_PRODUCER_ID:
            self.last_batch_of_producer[header.producer_id] = header.base_offset
        if self.full or header.is_transactional or header.is_control:
            return
        latest = self.latest
        for record in decode_batch(data):
            if record.key is None:
                continue
            if len(latest) >= keys_max and record.key not in latest:
                self.full, self.end_offset = True, record.offset
                return
            latest[record.key] = record.offset


def _build_offset_map(
    log: PartitionLog,
    segments: Sequence[SegmentInfo],
    keys_max: int,
    should_stop: Callable[[], bool],
) -> _OffsetMap:
    """Reads `segments` (oldest first) until the map is full. The segment in which it fills is
    still read to its end, for its batch count and producers."""
    offset_map = _OffsetMap(end_offset=segments[-1].last_offset + 1 if segments else 0)
    for info in segments:
        if should_stop():
            raise _Stopped("the cleaner is stopping or the log was unregistered")
        count = 0
        for header, data in _read_batches(log, info):
            offset_map.add(header, data, keys_max)
            count += 1
        offset_map.batch_counts[info.base_offset] = count
        if offset_map.full:
            break
    return offset_map


def _read_batches(log: PartitionLog, info: SegmentInfo) -> Iterator[tuple[BatchHeader, bytes]]:
    """Each batch of a sealed segment's file, its CRC verified. A damaged batch raises
    BatchError if the log still holds the segment as it was, _Stopped if not (a truncation
    cut the file under the reader)."""
    try:
        with open(info.path, "rb") as file:
            position = 0
            while position < info.size_bytes:
                header, data = _read_batch(file, info.size_bytes - position)
                position += header.size_bytes
                yield header, data
    except FileNotFoundError as error:
        raise _Stopped(str(error)) from None
    except BatchError:
        _raise_unless_changed(log, [info])
        raise


def _read_batch(file: BinaryIO, bytes_left: int) -> tuple[BatchHeader, bytes]:
    head = file.read(HEADER_SIZE)
    header = BatchHeader.parse(head)
    if header.size_bytes > bytes_left:
        raise CorruptBatchError(f"batch at offset {header.base_offset} runs past the segment")
    data = head + file.read(header.size_bytes - HEADER_SIZE)
    verify_batch(data)
    return header, data


def _raise_unless_changed(log: PartitionLog, infos: Sequence[SegmentInfo]) -> None:
    """Raises _Stopped if the log no longer holds every one of `infos` as it was."""
    if not set(infos) <= set(log.segments()):
        raise _Stopped(f"segments {[info.base_offset for info in infos]} changed")


# --- grouping and copying ---


def _group_segments(
    segments: Sequence[SegmentInfo], offset_map: _OffsetMap, bytes_max: int, batches_max: int
) -> list[list[SegmentInfo]]:
    """Consecutive segments, grouped while their sizes fit segment.bytes, their batches fit
    the time index (at most one entry a batch; the smaller of the two indexes) and their
    offsets fit 4 bytes relative to the group's base, as Kafka groups them."""
    groups: list[list[SegmentInfo]] = []
    size_bytes = batches = 0
    for info in segments:
        count = offset_map.batch_counts[info.base_offset]
        if (
            groups
            and size_bytes + info.size_bytes <= bytes_max
            and batches + count <= batches_max
            and info.last_offset - groups[-1][0].base_offset <= _INT32_MAX
        ):
            groups[-1].append(info)
            size_bytes, batches = size_bytes + info.size_bytes, batches + count
        else:
            groups.append([info])
            size_bytes, batches = info.size_bytes, count
    return groups


@dataclass
class _Copied:
    records_read: int = 0
    records_kept: int = 0
    bytes_written: int = 0
    changed: bool = False  # some batch was rebuilt or dropped


def _clean_group(
    log: PartitionLog, group: list[SegmentInfo], offset_map: _OffsetMap, horizon_ms: int
) -> CleanResult:
    """Copies `group` into one `.cleaned` file and swaps it in; NOTHING_CLEANED for a lone
    segment that would stay the same. The file is removed unless the swap took it."""
    base = group[0].base_offset
    paths = [
        log.directory / (file_name(base, suffix) + CLEANED_SUFFIX)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)
    ]
    swapped = False
    try:
        with open(paths[0], "wb") as out:
            copied = _Copied()
            for info in group:
                retain_deletes = _newest_ms(info) > horizon_ms
                for header, data in _read_batches(log, info):
                    _copy_batch(header, data, offset_map, retain_deletes, out, copied)
        if len(group) == 1 and not copied.changed:
            return NOTHING_CLEANED
        _keep_modification_time(paths[0], group[-1])
        _swap(log, group, paths[0])
        swapped = True
    finally:
        if not swapped:
            for path in paths:
                path.unlink(missing_ok=True)
    before = sum(info.size_bytes for info in group)
    return CleanResult(
        len(group), copied.records_read, copied.records_kept, before, copied.bytes_written
    )


def _keep_modification_time(path: Path, info: SegmentInfo) -> None:
    """Gives the cleaned file the last replaced segment's modification time, as Kafka does:
    for segments without timestamps it is their age for retention and the delete horizon."""
    try:
        stat = os.stat(info.path)
    except FileNotFoundError as error:
        raise _Stopped(str(error)) from None
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _swap(log: PartitionLog, group: list[SegmentInfo], path: Path) -> None:
    try:
        log.replace_segments(group, [path])
    except ValueError:
        _raise_unless_changed(log, group)
        raise  # the log refused our file: a bug here, not a race


def _copy_batch(
    header: BatchHeader,
    data: bytes,
    offset_map: _OffsetMap,
    retain_deletes: bool,
    out: BinaryIO,
    copied: _Copied,
) -> None:
    """Writes what stays of one batch to `out` and counts it."""
    kept_data, read, kept = _filter_batch(header, data, offset_map, retain_deletes)
    copied.records_read += read
    copied.records_kept += kept
    copied.changed |= kept_data is not data
    if kept_data is not None:
        out.write(kept_data)
        copied.bytes_written += len(kept_data)


def _filter_batch(
    header: BatchHeader, data: bytes, offset_map: _OffsetMap, retain_deletes: bool
) -> tuple[bytes | None, int, int]:
    """(what stays of the batch: `data` itself when unchanged, None when dropped; records
    read; records kept), by the rules of the module docstring."""
    if header.is_transactional or header.is_control:
        return data, header.record_count, header.record_count
    records = decode_batch(data)
    survivors = [r for r in records if _retain(r, offset_map, retain_deletes)]
    read, kept = len(records), len(survivors)
    if survivors:
        return (data if kept == read else _rebuild(header, survivors)), read, kept
    if offset_map.last_batch_of_producer.get(header.producer_id) == header.base_offset:
        return (data if read == 0 else _rebuild(header, [])), read, kept
    return None, read, kept


def _retain(record: Record, offset_map: _OffsetMap, retain_deletes: bool) -> bool:
    if record.offset >= offset_map.end_offset:
        return True
    if record.key is None or offset_map.latest[record.key] != record.offset:
        return False
    return record.value is not None or retain_deletes


def _rebuild(header: BatchHeader, records: Sequence[Record]) -> bytes:
    """The batch `header` heads, holding only `records` at their own offsets (maybe none)."""
    builder = BatchBuilder(
        compression=header.compression,
        base_offset=header.base_offset,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        timestamp_type=header.timestamp_type,
        is_transactional=header.is_transactional,
        last_offset_delta=header.last_offset_delta,
    )
    for record in records:
        builder.append(
            record.timestamp,
            record.key,
            record.value,
            record.headers,
            offset_delta=record.offset - header.base_offset,
        )
    return builder.build()


# --- the broker's cleaner thread ---


class LogCleaner:
    """Cleans every registered log once per `interval_ms` on one background thread (Kafka runs
    log.cleaner.threads of them; one is enough for a broker of this size). `clock_ms` gives the
    `now_ms` of each pass. Errors of one log are logged and the others still get cleaned."""

    def __init__(self, *, interval_ms: int = 15_000, clock_ms: Callable[[], int]) -> None:
        assert interval_ms > 0, interval_ms
        self._interval_ms = interval_ms
        self._clock_ms = clock_ms
        self._logs: tuple[PartitionLog, ...] = ()  # replaced whole, so readers need no lock
        self._registry_lock = threading.Lock()
        self._cleaning_lock = threading.Lock()  # held while one log is being cleaned
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def register(self, log: PartitionLog) -> None:
        """Cleans `log` from the next pass on (registering it again changes nothing)."""
        with self._registry_lock:
            if not self._is_registered(log):
                self._logs = (*self._logs, log)

    def unregister(self, log: PartitionLog) -> None:
        """Stops cleaning `log`: once this returns, the cleaner no longer touches it (a pass
        in progress stops after the group it is swapping), so the broker may close, truncate
        or delete it. Unknown logs are ignored."""
        with self._registry_lock:
            self._logs = tuple(registered for registered in self._logs if registered is not log)
        with self._cleaning_lock:
            pass  # waits for a pass over `log` in progress to stop

    def start(self) -> None:
        assert self._thread is None, "the cleaner is already running"
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="log-cleaner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops the thread (a pass in progress stops after its current group) and waits for
        it. Idempotent."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def clean_now(self) -> list[CleanResult]:
        """One pass over the registered logs on the caller's thread (tests, tools); errors
        propagate. Waits while the background thread cleans a log."""
        results = []
        for registered in self._logs:
            result = self._clean_one(registered, stop_with_thread=False)
            if result is not None:
                results.append(result)
        return results

    def _run(self) -> None:
        while not self._stopping.wait(self._interval_ms / 1000):
            for registered in self._logs:
                if self._stopping.is_set():
                    return
                try:
                    self._clean_one(registered, stop_with_thread=True)
                except Exception:  # one broken log must not stop the cleaning of the others
                    logger.exception("cleaning %s failed", registered.directory)

    def _clean_one(self, target: PartitionLog, *, stop_with_thread: bool) -> CleanResult | None:
        """Cleans `target` unless it was unregistered meanwhile (None). The pass stops early
        if `target` is unregistered, or with `stop_with_thread` if the cleaner stops."""
        with self._cleaning_lock:
            if not self._is_registered(target):
                return None

            def should_stop() -> bool:
                stopping = stop_with_thread and self._stopping.is_set()
                return stopping or not self._is_registered(target)

            return _clean(
                target,
                now_ms=self._clock_ms(),
                keys_max=OFFSET_MAP_KEYS_MAX,
                should_stop=should_stop,
            )

    def _is_registered(self, target: PartitionLog) -> bool:
        return any(registered is target for registered in self._logs)
