"""Helpers shared by the log compaction tests: a compacted topic's config, keyed batches appended
as leader and replicated at once, a log read back record by record or batch by batch, and the
model of a clean (each key's latest record)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pykraft.broker.log import LogConfig, PartitionLog
from pykraft.proto.record_batch import BatchBuilder, BatchHeader, Record, decode_batch, iter_batches
from tests.unit.broker.log.support import NOW_MS

COMPACT = LogConfig(
    segment_bytes=400,
    index_interval_bytes=100,
    cleanup_policy=("compact",),
    delete_retention_ms=10_000,
)

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
