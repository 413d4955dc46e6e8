"""Log compaction as it runs: cleans alongside appends and reads lose nothing, a crash at any
step of a segment swap reopens to before or after it, small cleaned segments are grouped within
what segment.bytes and the indexes allow, and the broker's cleaner thread cleans the logs
registered with it."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from pykraft.broker.log import LogConfig, PartitionLog
from pykraft.broker.log.cleaner import CleanResult, LogCleaner, clean_log
from pykraft.broker.log.segment import LogSegment, SegmentInfo
from tests.unit.broker.log.compaction import (
    COMPACT,
    Stored,
    append,
    latest_per_key,
    open_compacted,
    stored,
)
from tests.unit.broker.log.support import NOW_MS
from tests.waiting import wait_until

DEADLINE_S = 10.0


# --- 1. concurrent appends and reads, reopening, crashes ---


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


# --- 2. the broker's cleaner thread ---


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
