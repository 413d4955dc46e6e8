"""The sparse offset and time indexes: Kafka's byte layout, lookups, truncation, and the sanity
checks that make a damaged index be rebuilt rather than trusted."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pykraft.broker.log import files
from pykraft.broker.log import index as index_module
from pykraft.broker.log.index import IndexCorruptError, OffsetIndex, TimeIndex


def _offset_index(tmp_path: Path, entries: list[tuple[int, int]], base: int = 100) -> OffsetIndex:
    index = OffsetIndex.create(tmp_path / "a.index", base, entries_max=10)
    for offset, position in entries:
        index.append(offset, position)
    return index


def test_offset_index_entries_are_relative_offset_and_position_big_endian(tmp_path: Path) -> None:
    index = _offset_index(tmp_path, [(110, 4096), (125, 8200)])
    index.close()
    assert (tmp_path / "a.index").read_bytes() == struct.pack(">iiii", 10, 4096, 25, 8200)


def test_offset_lookup_finds_the_largest_entry_at_or_below(tmp_path: Path) -> None:
    index = _offset_index(tmp_path, [(110, 4096), (125, 8200), (130, 9000)])
    assert index.lookup(99) == (100, 0)  # below every entry: the segment start
    assert index.lookup(109) == (100, 0)
    assert index.lookup(110) == (110, 4096)
    assert index.lookup(124) == (110, 4096)
    assert index.lookup(125) == (125, 8200)
    assert index.lookup(10**12) == (130, 9000)
    index.close()


def test_offset_index_truncation_drops_entries_at_or_above(tmp_path: Path) -> None:
    index = _offset_index(tmp_path, [(110, 10), (125, 20), (130, 30)])
    index.truncate_to(125)
    assert index.entry_count == 1 and index.last_entry() == (110, 10)
    index.write_out()  # entries reach the file on write_out/flush/close, not per append
    assert (tmp_path / "a.index").stat().st_size == 8
    index.append(126, 25)  # appending continues after the cut
    index.close()
    reloaded = OffsetIndex.load(tmp_path / "a.index", 100, entries_max=10)
    assert [reloaded.lookup(o) for o in (111, 126)] == [(110, 10), (126, 25)]
    reloaded.close()


def test_offset_index_is_full_at_its_entry_limit(tmp_path: Path) -> None:
    index = OffsetIndex.create(tmp_path / "a.index", 0, entries_max=2)
    index.append(1, 10)
    assert not index.is_full
    index.append(2, 20)
    assert index.is_full
    with pytest.raises(AssertionError):
        index.append(3, 30)
    index.close()


def test_offset_index_refuses_entries_that_do_not_increase(tmp_path: Path) -> None:
    index = _offset_index(tmp_path, [(110, 50)])
    with pytest.raises(AssertionError):
        index.append(110, 60)
    with pytest.raises(AssertionError):
        index.append(111, 50)
    index.close()


@pytest.mark.parametrize(
    "content",
    [
        struct.pack(">ii", 1, 10) + b"\x00\x01",  # not a whole number of entries
        struct.pack(">ii", -1, 10),  # below the base offset
        struct.pack(">iiii", 1, 10, 3, -20),  # a negative position
    ],
)
def test_damaged_offset_index_is_detected(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "a.index").write_bytes(content)
    with pytest.raises(IndexCorruptError):
        OffsetIndex.load(tmp_path / "a.index", 100, entries_max=10)


@pytest.mark.parametrize(
    "content",
    [
        struct.pack(">iiiiii", 1, 5, 5, 10, 3, 20),  # offsets going down
        struct.pack(">iiiiii", 1, 5, 3, 20, 5, 10),  # positions going down
    ],
)
def test_entries_out_of_order_are_cut_off_when_first_read(tmp_path: Path, content: bytes) -> None:
    """Only the file's size and last entry are read at load (as Kafka's sanity check); the
    order is seen when the entries are first used, and the sorted prefix is kept."""
    (tmp_path / "a.index").write_bytes(content)
    index = OffsetIndex.load(tmp_path / "a.index", 100, entries_max=10)
    first = struct.unpack(">ii", content[8:16])
    assert index.lookup(200) == (100 + first[0], first[1])
    assert index.entry_count == 2
    assert (tmp_path / "a.index").read_bytes() == content[:16]


def test_load_reads_only_the_last_entry_and_the_rest_on_first_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's LazyIndex: opening a segment costs no read of its index entries."""
    index = _offset_index(tmp_path, [(110, 4096), (125, 8200), (130, 9000)])
    index.close()
    reads: list[Path] = []

    def read_whole(path: Path) -> bytes:
        reads.append(path)
        return files.read_whole(path)

    monkeypatch.setattr(index_module, "read_whole", read_whole)
    loaded = OffsetIndex.load(tmp_path / "a.index", 100, entries_max=10)
    assert (loaded.entry_count, loaded.last_entry(), loaded.is_full) == (3, (130, 9000), False)
    assert reads == []
    assert [loaded.lookup(offset) for offset in (99, 124, 125, 200)] == [
        (100, 0),
        (110, 4096),
        (125, 8200),
        (130, 9000),
    ]
    assert reads == [tmp_path / "a.index"]
    loaded.append(140, 9500)  # appends and truncation work on the entries read
    loaded.truncate_to(130)
    assert (loaded.entry_count, loaded.last_entry()) == (2, (125, 8200))
    loaded.close()
    assert (tmp_path / "a.index").read_bytes() == struct.pack(">iiii", 10, 4096, 25, 8200)


def test_time_index_entries_are_timestamp_and_relative_offset(tmp_path: Path) -> None:
    index = TimeIndex.create(tmp_path / "a.timeindex", 100, entries_max=10)
    index.maybe_append(5000, 104)
    index.close()
    assert (tmp_path / "a.timeindex").read_bytes() == struct.pack(">qi", 5000, 4)


def test_time_index_keeps_only_increasing_timestamps(tmp_path: Path) -> None:
    index = TimeIndex.create(tmp_path / "a.timeindex", 100, entries_max=10)
    index.maybe_append(5000, 104)
    index.maybe_append(5000, 108)  # not above the last: ignored, as in Kafka
    index.maybe_append(4000, 110)
    index.maybe_append(6000, 112)
    assert index.entry_count == 2
    assert index.lookup(4999) == (-1, 100)
    assert index.lookup(5000) == (5000, 104)
    assert index.lookup(5999) == (5000, 104)
    assert index.lookup(10**15) == (6000, 112)
    index.truncate_to(112)
    assert index.last_entry() == (5000, 104)
    index.close()


def test_time_index_may_take_one_entry_past_full_when_a_segment_closes(tmp_path: Path) -> None:
    index = TimeIndex.create(tmp_path / "a.timeindex", 0, entries_max=1)
    index.maybe_append(10, 1)
    assert index.is_full
    index.maybe_append(20, 2, allow_full=True)
    assert index.last_entry() == (20, 2)
    index.close()


def test_damaged_time_index_is_detected(tmp_path: Path) -> None:
    (tmp_path / "a.timeindex").write_bytes(struct.pack(">qi", 50, 1) + b"\x00")
    with pytest.raises(IndexCorruptError):
        TimeIndex.load(tmp_path / "a.timeindex", 0, entries_max=10)
    (tmp_path / "a.timeindex").write_bytes(struct.pack(">qiqi", 50, 1, 40, 2))
    index = TimeIndex.load(tmp_path / "a.timeindex", 0, entries_max=10)
    assert index.lookup(45) == (-1, 0)  # timestamps going down: only the first entry stays
    assert index.lookup(60) == (50, 1) and index.entry_count == 1
