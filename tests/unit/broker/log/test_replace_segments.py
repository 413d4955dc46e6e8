"""`replace_segments`, the cleaner's hook: cleaned files take the place of consecutive old
segments, verified first, swapped with Kafka's `.cleaned` -> `.swap` -> rename protocol, and a
swap interrupted after its commit point is completed on the next open."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.broker.log import LogError, PartitionLog, SegmentInfo
from pykraft.broker.log.segment_names import file_name
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import iter_batches

from .support import NOW_MS, batch, open_log, read_all


@pytest.fixture
def log(tmp_path: Path) -> Iterator[PartitionLog]:
    opened = open_log(tmp_path / "compacted-0")
    for number in range(60):
        payload = batch([b"k%d-%d" % (number, i) for i in range(3)])
        opened.append_as_leader(payload, leader_epoch=0, now_ms=NOW_MS)
    assert len(opened.segments()) > 4
    yield opened
    opened.close()


def _write_cleaned(log: PartitionLog, old: list[SegmentInfo], keep_every: int = 2) -> Path:
    """Keeps every `keep_every`-th batch of `old`, in one `.cleaned` file at old[0]'s base."""
    kept = b""
    for info in old:
        data = info.path.read_bytes()
        for index, (position, header) in enumerate(iter_batches(data)):
            if index % keep_every == 0:
                kept += data[position : position + header.size_bytes]
    path = log.directory / (file_name(old[0].base_offset, ".log") + ".cleaned")
    path.write_bytes(kept)
    return path


def _stored_names(log: PartitionLog) -> set[str]:
    return {path.name for path in log.directory.iterdir()}


def test_cleaned_segments_replace_the_old_ones(log: PartitionLog) -> None:
    before = read_all(log)
    old = list(log.segments()[:3])
    end = old[-1].last_offset + 1
    log.replace_segments(old, [_write_cleaned(log, old)])  # keeps the batches 0-2, 6-8, ...
    assert [info.base_offset for info in log.segments()[:2]] == [0, end]
    after = read_all(log)
    assert after == [(o, v) for o, v in before if o >= end or (o // 3) % 2 == 0]
    assert not {n for n in _stored_names(log) if n.endswith((".cleaned", ".swap", ".deleted"))}
    assert log.read(4, bytes_max=1).first_offset == 6  # offsets 3-5 went: the next batch
    log.close()
    reopened = open_log(log.directory)
    assert read_all(reopened) == after
    reopened.close()


def test_stale_or_active_segments_are_refused(log: PartitionLog) -> None:
    infos = log.segments()
    path = _write_cleaned(log, [infos[-2]])
    with pytest.raises(ValueError):
        log.replace_segments([infos[-1]], [path])  # the active segment
    log.truncate_to(infos[-2].base_offset + 1)  # changes the segment the snapshot saw
    with pytest.raises(ValueError):
        log.replace_segments([infos[-2]], [path])
    with pytest.raises(ValueError):
        log.replace_segments(list(log.segments()[:1]), [log.directory / "elsewhere.cleaned"])


def test_a_corrupt_cleaned_file_is_refused_and_nothing_changes(log: PartitionLog) -> None:
    old = list(log.segments()[:2])
    path = _write_cleaned(log, old)
    damaged = bytearray(path.read_bytes())
    damaged[-1] ^= 0xFF
    path.write_bytes(bytes(damaged))
    before = (read_all(log), log.segments())
    with pytest.raises(LogError) as raised:
        log.replace_segments(old, [path])
    assert raised.value.error_code == common_pb2.CORRUPT_MESSAGE
    assert (read_all(log), log.segments()) == before
    assert not path.exists()


def test_cleaned_offsets_must_stay_in_the_replaced_range(log: PartitionLog) -> None:
    infos = log.segments()
    path = _write_cleaned(log, [infos[0], infos[1]], keep_every=1)
    with pytest.raises(ValueError):
        log.replace_segments([infos[0]], [path])  # it holds the next segment's offsets too
    assert log.segments() == infos


def test_a_committed_swap_is_completed_on_open(log: PartitionLog) -> None:
    old = list(log.segments()[:3])
    path = _write_cleaned(log, old)
    expected_first = read_all(log)[0]
    log.close()
    path.rename(path.with_name(path.name.replace(".cleaned", ".swap")))  # crash after commit
    (log.directory / ".kafka_cleanshutdown").unlink()
    reopened = open_log(log.directory)
    infos = reopened.segments()
    assert infos[0].base_offset == old[0].base_offset
    assert infos[1].base_offset == old[-1].last_offset + 1
    assert read_all(reopened)[0] == expected_first and read_all(reopened)[1][0] == 1
    assert read_all(reopened)[3][0] == 6  # the batch 3-5 was cleaned away
    assert not {n for n in _stored_names(reopened) if n.endswith((".swap", ".deleted"))}
    reopened.close()


def test_uncommitted_cleaner_output_is_removed_on_open(log: PartitionLog) -> None:
    path = _write_cleaned(log, list(log.segments()[:2]))
    before = read_all(log)
    log.close()
    reopened = open_log(log.directory)
    assert not path.exists() and read_all(reopened) == before
    reopened.close()
