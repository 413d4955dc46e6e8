"""Log compaction: the latest record of every key survives at its own offset, tombstones go
after delete.retention.ms, recent and unreplicated records are left alone, batches keep their
identity, and the log stays readable, appendable and reopenable through a clean and a crash.

How cleans run (alongside appends and reads, through crashes, grouping segments) and the
broker's cleaner thread are in test_cleaner_runs.py."""

from __future__ import annotations

import itertools
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pykraft.broker.log import LogConfig
from pykraft.broker.log.cleaner import NOTHING_CLEANED, clean_log
from pykraft.proto.record_batch import Compression, TimestampType
from tests.unit.broker.log.compaction import (
    COMPACT,
    Entry,
    append,
    keyed_batch,
    latest_per_key,
    open_compacted,
    stored,
    stored_batches,
)
from tests.unit.broker.log.support import NOW_MS

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


# --- 5. other policies ---


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
