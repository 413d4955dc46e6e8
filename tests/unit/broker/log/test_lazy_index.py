"""Indexes read on first use (Kafka's LazyIndex): a clean restart reads no index entries, and
every lookup after it (offsets and timestamps) still finds the right batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.broker.log import LogConfig, PartitionLog, files
from pykraft.broker.log import index as index_module
from pykraft.proto.record_batch import BatchHeader, iter_batches

from .support import NOW_MS, batch, open_log

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=150)


def _filled(directory: Path) -> dict[int, tuple[int, int]]:
    """A log of 120 one-record batches, timestamps NOW_MS + 10 * offset, closed; returns each
    offset's (segment base offset, position of its batch)."""
    log = open_log(directory, CONFIG)
    for number in range(120):
        log.append_as_leader(
            batch([b"v%03d" % number], timestamp=NOW_MS + 10 * number),
            leader_epoch=0,
            now_ms=NOW_MS,
        )
    log.close()
    where: dict[int, tuple[int, int]] = {}
    for path in sorted(directory.glob("*.log")):
        for position, header in iter_batches(path.read_bytes()):
            where[header.base_offset] = (int(path.stem), position)
    return where


def test_a_clean_restart_reads_no_index_and_lookups_find_every_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = _filled(tmp_path / "t-0")
    assert len({base for base, _ in where.values()}) > 3, "several segments"
    index_reads: list[str] = []

    def read_whole(path: Path) -> bytes:
        index_reads.append(path.name)
        return files.read_whole(path)

    monkeypatch.setattr(index_module, "read_whole", read_whole)
    log: PartitionLog = open_log(tmp_path / "t-0", CONFIG)
    assert index_reads == []
    segments = {segment.base_offset: segment for segment in log._local.view.segments}
    for offset, (base, position) in where.items():
        assert segments[base].find_position(offset) == position, offset
        result = log.read(offset, bytes_max=1)
        assert BatchHeader.parse(result.data).base_offset == offset
    for offset in (0, 37, 64, 119):
        assert log.offset_for_timestamp(NOW_MS + 10 * offset - 5) == (offset, NOW_MS + 10 * offset)
    assert index_reads, "the lookups read the indexes"
    log.append_as_leader(batch([b"after"]), leader_epoch=0, now_ms=NOW_MS)
    log.close()
    reopened = open_log(tmp_path / "t-0", CONFIG)
    assert BatchHeader.parse(reopened.read(120, bytes_max=1).data).base_offset == 120
    reopened.close()
