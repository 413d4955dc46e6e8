"""Offset translation never skips a record and is exact where the copies are contiguous; the
copier writes every run start at once (issue 15 §2.4)."""

from __future__ import annotations

from pykraft.client import TopicPartition
from pykraft.mirror.offset_syncs import OffsetSyncStore, SyncSchedule, translate
from pykraft.mirror.records import OffsetSync

TP = TopicPartition("t", 0)


def pair(upstream: int, downstream: int) -> OffsetSync:
    return OffsetSync(TP, upstream, downstream)


def store_of(*pairs: OffsetSync) -> OffsetSyncStore:
    store = OffsetSyncStore()
    store.add(pairs)
    return store


def test_contiguous_copies_translate_exactly() -> None:
    # Source 100..199 copied to 0..99: a topic whose start was deleted before mirroring.
    store = store_of(*(pair(u, u - 100) for u in range(100, 200)))
    assert store.translate(TP, 100) == 0
    assert store.translate(TP, 150) == 50
    assert store.translate(TP, 199) == 99
    assert store.translate(TP, 200) == 100  # all read: the next copy
    assert store.translate(TP, 99) is None  # before anything mirrored


def test_past_the_latest_pair_translation_stops_one_after_it() -> None:
    """Records after the latest pair are not known copied yet: a group further on the source
    resumes at the copy of the next one, reading again what it skipped, never missing it."""
    store = store_of(pair(0, 0), pair(1, 1))
    assert store.translate(TP, 2) == 2
    assert store.translate(TP, 50) == 2


def test_a_gap_in_the_source_translates_to_the_next_copy() -> None:
    # Source 0..9 then 20..29 (10..19 compacted away) copied to 0..19.
    store = store_of(*(pair(u, u) for u in range(10)), *(pair(u, u - 10) for u in range(20, 30)))
    assert store.translate(TP, 10) == 10  # the group read 0..9: next is the copy of 20
    assert store.translate(TP, 15) == 10  # inside the gap: still the copy of 20
    assert store.translate(TP, 20) == 10
    assert store.translate(TP, 25) == 15


def test_only_run_starts_and_the_latest_are_kept() -> None:
    store = OffsetSyncStore()
    starts = store.add([pair(0, 0), pair(1, 1), pair(5, 2), pair(6, 3), pair(7, 4)])
    assert starts == [True, False, True, False, False]
    assert store.latest(TP) == pair(7, 4)


def test_a_rewind_drops_the_history_it_contradicts() -> None:
    """The source topic was recreated (offsets from 0 again): older pairs no longer hold."""
    store = store_of(pair(0, 0), pair(10, 5), pair(11, 6))
    assert store.add([pair(0, 7)]) == [True]
    assert store.latest(TP) == pair(0, 7)
    assert store.translate(TP, 0) == 7
    assert store.translate(TP, 10) == 8


def test_translate_with_explicit_pairs() -> None:
    assert translate([], 5) is None
    assert translate([pair(3, 3)], 3) == 3
    assert translate([pair(3, 3), pair(8, 5)], 6) == 5  # capped at the next run's start


def test_sync_schedule_writes_run_starts_lagging_pairs_and_quiet_partitions() -> None:
    schedule = SyncSchedule(offset_lag_max=100, flush_interval_ms=5000)
    assert schedule.on_pair(pair(0, 0), run_start=True, now_ms=0)
    assert not schedule.on_pair(pair(99, 99), run_start=False, now_ms=10)
    assert schedule.on_pair(pair(100, 100), run_start=False, now_ms=20)  # offset.lag.max
    assert schedule.on_pair(pair(150, 140), run_start=True, now_ms=30)  # a gap: at once
    assert not schedule.on_tick(pair(160, 150), now_ms=5029)
    assert schedule.on_tick(pair(160, 150), now_ms=5030)  # the flush interval passed
    assert not schedule.on_tick(pair(160, 150), now_ms=20_000)  # nothing new since
    assert schedule.on_tick(pair(161, 151), now_ms=5031, force=True)  # a clean stop
