"""Helpers shared by the partition log tests: batches built with the real codec, a log filled with
numbered batches, and reading a whole log back as (offset, value) pairs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pykraft.broker.log import LogConfig, PartitionLog
from pykraft.proto.record_batch import Compression, Record, build_batch, decode_batch, iter_batches

NOW_MS = 1_700_000_000_000
SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=128)


def batch(
    values: Sequence[bytes],
    *,
    timestamp: int = NOW_MS,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One batch with a record per value, all at `timestamp`."""
    return build_batch(
        [(timestamp, None, value) for value in values],
        base_offset=base_offset,
        compression=compression,
        partition_leader_epoch=partition_leader_epoch,
    )


def records(data: bytes) -> list[Record]:
    """Every record of a concatenation of whole batches (each verified)."""
    return [record for position, _ in iter_batches(data) for record in decode_batch(data, position)]


def read_all(log: PartitionLog, *, bytes_max: int = 1 << 20) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record from the log start offset to the end, by reading."""
    found: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, bytes_max=bytes_max)
        assert result.data, f"no progress at offset {offset}"
        found += [(r.offset, r.value) for r in records(result.data) if r.offset >= offset]
        offset = result.next_offset
    return found


def open_log(directory: Path, config: LogConfig = SMALL) -> PartitionLog:
    return PartitionLog.open(directory, config, now_ms=NOW_MS)


def fill(log: PartitionLog, count: int, *, per_batch: int = 3, epoch: int = 0) -> None:
    """`count` batches of `per_batch` records each, appended as leader in `epoch`."""
    for number in range(count):
        values = [b"v%d-%d" % (number, i) for i in range(per_batch)]
        log.append_as_leader(batch(values), leader_epoch=epoch, now_ms=NOW_MS)
