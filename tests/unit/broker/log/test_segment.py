"""A segment on its own: Kafka's index rule, loading trusted files, recovering torn ones."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from pykraft.broker.log import LogConfig
from pykraft.broker.log.segment import LogSegment
from pykraft.broker.log.segment_names import base_offset_of, file_name
from pykraft.broker.log.segment_reads import RECENT_BATCHES_MAX
from pykraft.proto.record_batch import BatchHeader, iter_batches

from .support import batch

CONFIG = LogConfig(index_interval_bytes=200)


def _append(segment: LogSegment, base_offset: int, count: int) -> None:
    data = batch([b"x" * 40] * count, base_offset=base_offset)
    segment.append([data], [(0, BatchHeader.parse(data))])


def _filled(tmp_path: Path) -> tuple[LogSegment, list[tuple[int, BatchHeader]]]:
    segment = LogSegment.create(tmp_path, 50, CONFIG)
    for number in range(12):
        _append(segment, 50 + 2 * number, 2)
    data = segment.log_path.read_bytes()
    return segment, list(iter_batches(data))


def test_file_names_are_twenty_digit_base_offsets() -> None:
    assert file_name(42, ".log") == "00000000000000000042.log"
    assert base_offset_of(Path("00000000000000000042.index")) == 42
    assert base_offset_of(Path("00000000000000000042.log.swap")) == 42
    assert base_offset_of(Path("leader-epoch-checkpoint")) is None


def test_index_gets_an_entry_once_more_than_the_interval_was_appended(tmp_path: Path) -> None:
    segment, batches = _filled(tmp_path)
    size = batches[0][1].size_bytes
    assert 200 // size + 1 < len(batches)
    expected = []
    since = 0
    for position, header in batches:
        if since > 200:
            expected.append((header.last_offset - 50, position))
            since = 0
        since += size
    segment.offset_index.write_out()
    stored = list(struct.iter_unpack(">ii", segment.index_path.read_bytes()))
    assert stored == expected and len(stored) >= 2
    segment.close_files()


def test_load_restores_what_append_built(tmp_path: Path) -> None:
    segment, batches = _filled(tmp_path)
    state = (segment.size, segment.next_offset, segment.max_timestamp, segment.mark())
    segment.on_become_inactive()
    segment.close_files()
    loaded = LogSegment.load(tmp_path, 50, CONFIG, set(os.listdir(tmp_path)))
    assert (loaded.size, loaded.next_offset, loaded.max_timestamp) == state[:3]
    assert loaded.mark().bytes_since_index_entry == state[3].bytes_since_index_entry
    assert loaded.find_position(63) == batches[6][0]
    loaded.close_files()


def test_find_position_and_read_return_whole_batches(tmp_path: Path) -> None:
    segment, batches = _filled(tmp_path)
    position = segment.find_position(63)  # offsets 62-63 are the seventh batch
    assert position == batches[6][0]
    found = segment.read(position, bytes_max=3 * batches[0][1].size_bytes, upper_offset=10**9)
    assert found is not None
    data, first, next_offset = found
    assert (first, next_offset) == (62, 68) and len(data) == 3 * batches[0][1].size_bytes
    assert segment.read(position, bytes_max=10**6, upper_offset=63) is None
    assert segment.find_position(10**9) is None
    segment.close_files()


def test_recover_cuts_a_torn_tail_and_rebuilds_the_indexes(tmp_path: Path) -> None:
    segment, batches = _filled(tmp_path)
    segment.close_files()
    index_bytes = segment.index_path.read_bytes()
    assert index_bytes
    cut = batches[-1][0] + 30
    with open(tmp_path / file_name(50, ".log"), "r+b") as file:
        file.truncate(cut)
    (tmp_path / file_name(50, ".index")).unlink()
    seen: list[int] = []
    recovered, cut_bytes = LogSegment.recovered(
        tmp_path, 50, CONFIG, lambda header: seen.append(header.base_offset)
    )
    assert cut_bytes == 30
    assert recovered.size == batches[-1][0] and recovered.next_offset == batches[-1][1].base_offset
    assert seen == [header.base_offset for _, header in batches[:-1]]
    recovered.close_files()  # writes the rebuilt indexes out
    rebuilt = recovered.index_path.read_bytes()
    assert rebuilt and index_bytes.startswith(rebuilt)


def test_recovery_leaves_the_stale_index_files_until_it_writes_the_rebuilt_ones(
    tmp_path: Path,
) -> None:
    """Emptying them at once cost two truncations per log recovered at start-up; a crash
    before the write-out finds the segment unflushed and rebuilds them again."""
    segment, _ = _filled(tmp_path)
    segment.close_files()
    rebuilt = {path: path.read_bytes() for path in (segment.index_path, segment.time_index_path)}
    assert all(rebuilt.values())
    for path in rebuilt:
        path.write_bytes(b"\x7f" * 24)  # stale: what recovery must not trust
    recovered, _ = LogSegment.recovered(tmp_path, 50, CONFIG, lambda header: None)
    assert all(path.read_bytes() == b"\x7f" * 24 for path in rebuilt)
    assert recovered.offset_index.entry_count == len(rebuilt[segment.index_path]) // 8
    recovered.close_files()
    assert {path: path.read_bytes() for path in rebuilt} == rebuilt


def test_truncate_drops_whole_batches_from_the_one_holding_the_offset(tmp_path: Path) -> None:
    segment, batches = _filled(tmp_path)
    removed = segment.truncate_to(65)  # inside the batch 64-65
    assert removed == sum(header.size_bytes for _, header in batches[7:])
    assert segment.next_offset == 64 and segment.size == batches[7][0]
    assert segment.offset_index.last_entry().offset < 64
    segment.close_files()


def _reads(segment: LogSegment, offsets: range) -> list[object]:
    """What find_position and batch_span (a few budgets and bounds) say at each offset."""
    answers: list[object] = []
    for offset in offsets:
        position = segment.find_position(offset)
        answers.append(position)
        if position is not None:
            for bytes_max, upper_offset in ((1, 10**9), (500, 10**9), (10**6, offset + 3)):
                span = segment.batch_span(position, bytes_max=bytes_max, upper_offset=upper_offset)
                answers.append(span)
    return answers


def test_tail_reads_from_the_recent_headers_agree_with_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    segment = LogSegment.create(tmp_path, 0, CONFIG)
    offset = 0
    for number in range(RECENT_BATCHES_MAX + 40):
        _append(segment, offset, 1 + number % 3)  # batches of 1, 2 and 3 records
        offset += 1 + number % 3
    assert len(segment.recent) == RECENT_BATCHES_MAX
    offsets = range(0, offset + 2)
    with_recent = _reads(segment, offsets)
    tail = segment.recent[0][1].base_offset
    reads_at = segment._read_at

    def no_header_reads(size: int, position: int) -> bytes:
        raise AssertionError(f"a header read at {position} for the tail")

    monkeypatch.setattr(segment, "_read_at", no_header_reads)
    _reads(segment, range(tail, offset + 2))  # the tail needs no file read to be found
    monkeypatch.setattr(segment, "_read_at", reads_at)
    recent, segment.recent = segment.recent, ()
    assert _reads(segment, offsets) == with_recent
    segment.recent = recent

    segment.truncate_to(offset - 10)  # then other batches at the same offsets
    offset = segment.next_offset
    for _ in range(5):
        _append(segment, offset, 4)
        offset += 4
    after = _reads(segment, range(0, offset + 2))
    segment.recent = ()
    assert _reads(segment, range(0, offset + 2)) == after
    segment.close_files()
