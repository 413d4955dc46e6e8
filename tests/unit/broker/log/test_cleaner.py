"""Log compaction: the latest record of every key survives at its own offset, tombstones go
after delete.retention.ms, recent and unreplicated records are left alone, batches keep their
identity, and the log stays readable, appendable and reopenable through a clean and a crash."""

from __future__ import annotations

import dataclasses
import itertools
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pykraft.broker.log import LogConfig, PartitionLog
from pykraft.broker.log.cleaner import NOTHING_CLEANED, CleanResult, LogCleaner, clean_log
from pykraft.broker.log.segment import LogSegment, SegmentInfo
from pykraft.proto.record_batch import (
    BatchBuilder,
    BatchHeader,
    Compression,
    Record,
    TimestampType,
    decode_batch,
    iter_batches,
)
from tests.unit.broker.log.support import NOW_MS

COMPACT = LogConfig(
    segment_bytes=400,
    index_interval_bytes=100,
    cleanup_policy=("compact",),
    delete_retention_ms=10_000,
)
DEADLINE_S = 10.0

Entry = tuple[bytes | None, bytes | None]  # (key, value) of a record to append
Stored = tuple[int, bytes | None, bytes | None]  # (offset, key, value) of a record read back


def keyed_batch(entries: Sequence[Entry], *, timestamp: int = NOW_MS, **builder: Any) -> bytes:
    """One batch of `entries`, all at `timestamp`; `builder` goes to BatchBuilder."""
    batch = BatchBuilder(**builder)
    for key, value in entries:
        batch.append(timestamp, key, value)
    return batch.build()


def append(
    log: PartitionLog, entries: Sequence[Entry], *, leader_epoch: int = 0, **batch: Any
) -> list[Stored]:
    """Appends one batch (keyword arguments as `keyed_batch`) as leader and moves the high
    watermark to the end, as if every replica had it; returns what was stored.

    A compacted log refuses keyless records, so they can only predate a switch of the topic to
    cleanup.policy=compact: a batch holding one is appended under the delete policy."""
    config = log.config
    if any(key is None for key, _ in entries):
        log.update_config(dataclasses.replace(config, cleanup_policy=("delete",)))
    try:
        info = log.append_as_leader(
            keyed_batch(entries, **batch), leader_epoch=leader_epoch, now_ms=NOW_MS
        )
    finally:
        log.update_config(config)
    log.update_high_watermark(log.log_end_offset)
    return [(info.first_offset + i, key, value) for i, (key, value) in enumerate(entries)]


def stored_batches(log: PartitionLog) -> list[tuple[BatchHeader, list[Record]]]:
    """Every batch from the log start to the end, read through the log."""
    found = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, bytes_max=1 << 20)
        assert result.data, f"no progress at offset {offset}"
        for position, header in iter_batches(result.data):
            found.append((header, decode_batch(result.data, position)))
        offset = result.next_offset
    return found


def stored(log: PartitionLog) -> list[Stored]:
    return [(r.offset, r.key, r.value) for _, rs in stored_batches(log) for r in rs]


def latest_per_key(records: Sequence[Stored], *, keep_tombstones: bool) -> list[Stored]:
    """The model of a clean: each key's last record (tombstones only if kept), keyless
    records dropped, in offset order."""
    last = {key: offset for offset, key, _ in records if key is not None}
    return [
        (offset, key, value)
        for offset, key, value in records
        if key is not None and last[key] == offset and (value is not None or keep_tombstones)
    ]


def open_compacted(directory: Path, config: LogConfig = COMPACT) -> PartitionLog:
    return PartitionLog.open(directory / "t-0", config, now_ms=NOW_MS)


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


# --- 1. the latest record of every key, at its offset ---

_KEYS = [b"a", b"b", b"c", b"d", b"e", None]
_ENTRIES = st.tuples(st.sampled_from(_KEYS), st.one_of(st.none(), st.binary(max_size=24)))
_directories = itertools.count()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batches=st.lists(st.lists(_ENTRIES, min_size=1, max_size=6), min_size=1, max_size=30),
    compression=st.sampled_from([Compression.NONE, Compression.LZ4, Compression.ZSTD]),
    tombstones_expired=st.booleans(),
)
def test_clean_keeps_exactly_the_latest_record_of_each_key(
    tmp_path: Path,
    batches: list[list[Entry]],
    compression: Compression,
    tombstones_expired: bool,
) -> None:
    directory = tmp_path / str(next(_directories))
    now_ms = NOW_MS + (COMPACT.delete_retention_ms if tombstones_expired else 0)
    with closing(open_compacted(directory)) as log:
        model = [r for entries in batches for r in append(log, entries, compression=compression)]
        active = log.segments()[-1]
        below = [r for r in model if r[0] < active.base_offset]

        result = clean_log(log, now_ms=now_ms)

        expected = latest_per_key(below, keep_tombstones=not tombstones_expired)
        expected += [r for r in model if r[0] >= active.base_offset]
        assert stored(log) == expected
        assert log.segments()[-1] == active
        assert result.records_read - result.records_kept == len(model) - len(expected)
        again = clean_log(log, now_ms=now_ms)  # may regroup segments, never drops a record
        assert again.records_read == again.records_kept
        assert stored(log) == expected
    with closing(open_compacted(directory)) as reopened:
        assert stored(reopened) == expected


# --- 2. tombstones ---


def test_tombstones_stay_until_delete_retention_has_passed(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    first = append(log, [(b"k", b"v1"), (b"other", b"x")])
    tombstone = append(log, [(b"k", None)])
    log.roll(now_ms=NOW_MS)
    active = append(log, [(b"later", b"y")])

    clean_log(log, now_ms=NOW_MS + COMPACT.delete_retention_ms - 1)
    assert stored(log) == [first[1], *tombstone, *active]

    clean_log(log, now_ms=NOW_MS + COMPACT.delete_retention_ms)
    assert stored(log) == [first[1], *active]
    log.close()


def test_a_superseded_tombstone_goes_at_once(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    append(log, [(b"k", b"v1"), (b"k", None)])
    revived = append(log, [(b"k", b"v2")])
    log.roll(now_ms=NOW_MS)

    clean_log(log, now_ms=NOW_MS)

    assert stored(log) == revived
    log.close()


# --- 3. recent and unreplicated records ---


def test_min_compaction_lag_protects_recent_segments(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=400, cleanup_policy=("compact",), min_compaction_lag_ms=60_000)
    log = open_compacted(tmp_path, config)
    old = append(log, [(b"k", b"old1"), (b"k", b"old2")], timestamp=NOW_MS - 120_000)
    log.roll(now_ms=NOW_MS)
    recent = append(log, [(b"k", b"new1"), (b"k", b"new2")], timestamp=NOW_MS)
    log.roll(now_ms=NOW_MS)
    active = append(log, [(b"k", b"active")], timestamp=NOW_MS)

    result = clean_log(log, now_ms=NOW_MS)
    assert result.segments_cleaned == 1
    assert stored(log) == [old[1], *recent, *active]

    clean_log(log, now_ms=NOW_MS + 60_001)
    assert stored(log) == [recent[1], *active]
    log.close()


def test_records_at_or_above_the_high_watermark_are_not_cleaned(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    replicated = log.append_as_leader(
        keyed_batch([(b"k", b"v1"), (b"k", b"v2")]), leader_epoch=0, now_ms=NOW_MS
    )
    log.update_high_watermark(replicated.last_offset + 1)
    log.roll(now_ms=NOW_MS)
    log.append_as_leader(keyed_batch([(b"k", b"v3")]), leader_epoch=0, now_ms=NOW_MS)
    log.roll(now_ms=NOW_MS)
    before = stored(log)

    clean_log(log, now_ms=NOW_MS)
    assert stored(log) == [before[1], before[2]]  # v3 may be truncated yet: v2 stays

    log.update_high_watermark(log.log_end_offset)
    clean_log(log, now_ms=NOW_MS)
    assert stored(log) == [before[2]]
    log.close()


def test_records_beyond_a_full_offset_map_stay(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    model = append(log, [(b"a", b"1"), (b"a", b"2"), (b"b", b"1"), (b"b", b"2")])
    model += append(log, [(b"c", b"1"), (b"c", b"2")])
    log.roll(now_ms=NOW_MS)

    clean_log(log, now_ms=NOW_MS, offset_map_keys_max=2)

    assert stored(log) == [model[1], model[3], model[4], model[5]]
    clean_log(log, now_ms=NOW_MS)
    assert stored(log) == [model[1], model[3], model[5]]
    log.close()


# --- 4. batches keep their identity ---


@pytest.mark.parametrize("compression", list(Compression))
@pytest.mark.parametrize("timestamp_type", list(TimestampType))
def test_a_rebuilt_batch_keeps_its_header(
    tmp_path: Path, compression: Compression, timestamp_type: TimestampType
) -> None:
    config = LogConfig(
        segment_bytes=1 << 20, cleanup_policy=("compact",), message_timestamp_type=timestamp_type
    )
    log = open_compacted(tmp_path, config)
    producer = {"producer_id": 42, "producer_epoch": 3, "compression": compression}
    entries: list[Entry] = [(b"k1", b"a" * 50), (b"k2", b"b" * 50), (b"k3", b"c" * 50)]
    append(log, entries, base_sequence=0, leader_epoch=7, **producer)
    append(log, [(b"k1", b"a2"), (b"k3", b"c2")], leader_epoch=7)
    append(log, [(b"k5", b"x")], base_sequence=3, leader_epoch=8, **producer)
    append(log, [(b"k6", b"y")], base_sequence=4, leader_epoch=8, **producer)
    append(log, [(b"k5", b"x2"), (b"k6", b"y2"), (b"k7", b"z")], leader_epoch=8)
    append(log, [(b"k7", b"z2")], leader_epoch=8)
    log.roll(now_ms=NOW_MS)
    before = stored_batches(log)

    clean_log(log, now_ms=NOW_MS)

    after = stored_batches(log)
    first_header, first_records = after[0]
    original = before[0][0]
    assert (first_header.base_offset, first_header.last_offset_delta) == (0, 2)
    assert first_header.producer_id == 42 and first_header.producer_epoch == 3
    assert first_header.base_sequence == 0 and first_header.partition_leader_epoch == 7
    assert first_header.compression is compression
    assert first_header.timestamp_type is timestamp_type
    assert [(r.offset, r.key, r.timestamp) for r in first_records] == [
        (1, b"k2", before[0][1][1].timestamp)
    ]
    assert first_header.max_timestamp == (
        original.max_timestamp if timestamp_type is TimestampType.LOG_APPEND_TIME else NOW_MS
    )
    assert after[1] == before[1]  # every record stayed: the batch is the same bytes
    # The producer's emptied batches: the earlier one goes, its last one stays, empty.
    empty_header, empty_records = after[2]
    assert empty_records == []
    assert (empty_header.base_offset, empty_header.base_sequence) == (6, 4)
    assert (empty_header.producer_id, empty_header.partition_leader_epoch) == (42, 8)
    assert [r.value for r in after[3][1]] == [b"x2", b"y2"]  # k7=z's record went
    assert [r.value for _, rs in after[4:] for r in rs] == [b"z2"]
    assert len(after) == 5
    log.close()


def test_transactional_batches_are_copied_as_they_are(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    append(log, [(b"k", b"plain1")])
    transactional = append(
        log,
        [(b"k", b"txn")],
        producer_id=77,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    later = append(log, [(b"k", b"plain2")])
    log.roll(now_ms=NOW_MS)
    before = stored_batches(log)

    clean_log(log, now_ms=NOW_MS)

    assert stored(log) == [*transactional, *later]
    assert stored_batches(log)[0] == before[1]
    log.close()


# --- 5. concurrent appends and reads, reopening, crashes ---


def test_appends_and_reads_during_cleans_lose_nothing(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    old = [r for i in range(20) for r in append(log, [(b"old-%d" % (i % 4), b"%d" % i)] * 2)]
    appended: list[Stored] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def appender() -> None:
        try:
            for i in range(150):
                appended.extend(append(log, [(b"new-%d" % i, b"value-%d" % i)]))
        except BaseException as error:
            errors.append(error)
        finally:
            done.set()

    def reader() -> None:
        try:
            while not done.is_set():
                records = stored(log)  # every batch read is whole and its CRC checks
                offsets = [offset for offset, _, _ in records]
                assert offsets == sorted(set(offsets)), "offsets must increase"
                for _, key, value in records:
                    assert key is not None and value is not None
                    if key.startswith(b"new-"):
                        assert value == b"value-" + key.removeprefix(b"new-")
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=appender), threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    cleaned = clean_log(log, now_ms=NOW_MS)
    while not done.is_set():
        cleaned += clean_log(log, now_ms=NOW_MS)
    for thread in threads:
        thread.join(DEADLINE_S)
        assert not thread.is_alive()
    assert errors == []
    assert cleaned.segments_cleaned > 0

    clean_log(log, now_ms=NOW_MS)
    active_base = log.segments()[-1].base_offset
    expected = latest_per_key([*old, *appended], keep_tombstones=True)
    assert [r for r in stored(log) if r[0] < active_base] == [
        r for r in expected if r[0] < active_base
    ]
    assert stored(log)[-len(appended) :] == appended  # all new keys: none was dropped
    final = stored(log)
    log.close()
    reopened = open_compacted(tmp_path)
    assert stored(reopened) == final
    reopened.close()


def test_a_crash_at_any_step_of_a_swap_reopens_to_before_or_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Copies the directory before every file rename of every swap (what a crash there
    leaves) and reopens each copy: it holds the records from just before or just after that
    swap, never a mix, and no swap leftovers."""
    log = open_compacted(tmp_path / "live")
    for i in range(12):
        append(log, [(b"k%d" % (i % 3), b"v%d" % i)] * 3)
    log.roll(now_ms=NOW_MS)
    swaps: list[tuple[list[Stored], list[Stored]]] = []  # records before and after each swap
    images: list[tuple[int, Path]] = []  # (swap, directory copy)
    rename, replace_segments = LogSegment.rename, PartitionLog.replace_segments

    def copy_then_rename(segment: LogSegment, suffix: str) -> None:
        image = tmp_path / "crash" / str(len(images)) / log.directory.name
        shutil.copytree(log.directory, image)
        images.append((len(swaps), image))
        rename(segment, suffix)

    def recorded_replace(
        target: PartitionLog, old: Sequence[SegmentInfo], new_paths: Sequence[Path]
    ) -> None:
        records_before = stored(target)
        replace_segments(target, old, new_paths)
        swaps.append((records_before, stored(target)))

    monkeypatch.setattr(LogSegment, "rename", copy_then_rename)
    monkeypatch.setattr(PartitionLog, "replace_segments", recorded_replace)
    result = clean_log(log, now_ms=NOW_MS)
    monkeypatch.undo()
    assert result.segments_cleaned > 1 and len(swaps) > 1
    log.close()

    outcomes: set[int] = set()
    for swap, image in images:
        recovered = PartitionLog.open(image, COMPACT, now_ms=NOW_MS)
        records = stored(recovered)
        left = [p.name for p in image.iterdir() if p.suffix in (".swap", ".deleted", ".cleaned")]
        recovered.close()
        assert records in swaps[swap], f"a crash before rename {len(outcomes)} of swap {swap}"
        assert left == []
        outcomes.add(swaps[swap].index(records))
    assert outcomes == {0, 1}  # crashes before and after the commit point were both seen
    reopened = open_compacted(tmp_path / "live")
    assert stored(reopened) == swaps[-1][1]
    reopened.close()


def test_small_cleaned_segments_are_grouped_up_to_segment_bytes(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    for i in range(30):
        append(log, [(b"k%d" % (i % 2), b"v%d" % i)] * 3)
    log.roll(now_ms=NOW_MS)
    sealed_before = len(log.segments()) - 1

    first = clean_log(log, now_ms=NOW_MS)  # groups by the sizes before cleaning, as Kafka
    second = clean_log(log, now_ms=NOW_MS)

    sealed = log.segments()[:-1]
    assert first.segments_cleaned == sealed_before
    assert second.segments_cleaned == sealed_before and len(sealed) == 1
    assert second.records_read == second.records_kept == 2
    assert [value for _, _, value in stored(log)] == [b"v28", b"v29"]
    assert [path for path in log.directory.iterdir() if path.suffix == ".cleaned"] == []
    log.close()


def test_groups_stay_within_what_the_indexes_hold(tmp_path: Path) -> None:
    """An index entry per batch (index.interval.bytes 0) and room for 3 time index entries:
    segments of one batch each are grouped by three, whatever segment.bytes allows."""
    config = LogConfig(
        segment_bytes=1 << 20,
        segment_index_bytes=3 * 12,
        index_interval_bytes=0,
        cleanup_policy=("compact",),
    )
    log = open_compacted(tmp_path, config)
    model = []
    for i in range(10):
        model += append(log, [(b"k%d" % i, b"v")])
        log.roll(now_ms=NOW_MS)

    result = clean_log(log, now_ms=NOW_MS)

    assert result.segments_cleaned == 9  # the last group, one segment, stays as it was
    assert [info.base_offset for info in log.segments()] == [0, 3, 6, 9, 10]
    assert stored(log) == model
    log.close()
    reopened = open_compacted(tmp_path, config)
    assert stored(reopened) == model
    reopened.close()


# --- 6. other policies ---


def test_a_log_without_compact_policy_is_untouched(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=400, cleanup_policy=("delete",))
    log = open_compacted(tmp_path, config)
    for i in range(10):
        append(log, [(b"k", b"v%d" % i)] * 3)
    log.roll(now_ms=NOW_MS)
    files = {path.name: path.read_bytes() for path in log.directory.iterdir()}

    assert clean_log(log, now_ms=NOW_MS + 10**9) == NOTHING_CLEANED

    assert {path.name: path.read_bytes() for path in log.directory.iterdir()} == files
    log.close()


# --- the broker's cleaner thread ---


def test_the_cleaner_thread_cleans_registered_logs(tmp_path: Path) -> None:
    good = open_compacted(tmp_path / "good")
    model = [r for i in range(10) for r in append(good, [(b"k%d" % (i % 2), b"v%d" % i)] * 2)]
    good.roll(now_ms=NOW_MS)
    broken = open_compacted(tmp_path / "broken")
    broken.close()
    cleaner = LogCleaner(interval_ms=10, clock_ms=lambda: NOW_MS)
    cleaner.register(broken)  # its errors are logged; the others are still cleaned
    cleaner.register(good)
    cleaner.start()
    try:
        expected = latest_per_key(model, keep_tombstones=True)
        wait_until(lambda: stored(good) == expected, "the thread to clean the log")
    finally:
        cleaner.stop()
    good.close()


def test_clean_now_cleans_only_registered_logs(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    append(log, [(b"k", b"v1"), (b"k", b"v2")])
    log.roll(now_ms=NOW_MS)
    cleaner = LogCleaner(clock_ms=lambda: NOW_MS)
    cleaner.register(log)
    cleaner.register(log)
    cleaner.unregister(log)
    assert cleaner.clean_now() == []
    assert len(stored(log)) == 2

    cleaner.register(log)
    results = cleaner.clean_now()

    assert results == [CleanResult(1, 2, 1, results[0].bytes_before, results[0].bytes_after)]
    assert results[0].bytes_after < results[0].bytes_before
    assert [value for _, _, value in stored(log)] == [b"v2"]
    log.close()
