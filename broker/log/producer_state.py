"""Idempotent producers' state on one partition replica (Kafka's ProducerStateManager, without
transactions or producer expiry).

An idempotent producer stamps each batch with its producer id, epoch and the sequence number of
the batch's first record; sequences count records per partition from 0 and wrap to 0 after
2**31 - 1. For every producer id seen, the state keeps its epoch and the metadata of its last
`PRODUCER_BATCHES_CACHED_MAX` batches (first and last sequence, first and last offset, max
timestamp), so that a batch sent again after a lost answer is recognised.

Rules on the leader, for a batch with a producer id (Kafka's), checked in this order:
- A batch whose epoch and (first, last) sequences equal one of the cached batches is a duplicate:
  nothing is written and the append answers with the original offsets.
- Producer id unknown: the first sequence must be 0, else UNKNOWN_PRODUCER_ID (the producer's
  state is gone, e.g. by retention; the client resets its identity).
- Epoch older than the known one: INVALID_PRODUCER_EPOCH. Newer: the first sequence must be 0.
- Same epoch: the first sequence must follow the last one written, else
  OUT_OF_ORDER_SEQUENCE_NUMBER.
A request is all-or-nothing: its batches are checked in order against the state that includes
its earlier batches; if every batch is a duplicate the request is one, and a request that mixes
duplicates with new batches is refused (OUT_OF_ORDER_SEQUENCE_NUMBER).

Followers, and the log rebuilding its state from its own batches, `apply` without checks (the
leader checked them), so a new leader knows what the old one wrote and dedupes retries of it.

What callers may rely on: `apply` takes batches in offset order only (`end_offset` never moves
back); the state is a function of the batches applied (in order) and of the snapshot it started
from, so a replica that replays the same log reaches the same state. At most `PRODUCERS_MAX`
producers are kept: past that, the one that wrote least recently is forgotten (its next batch
gets UNKNOWN_PRODUCER_ID, and the client starts afresh).

Snapshots use Kafka's producer snapshot format (version 1): int16 version, uint32 CRC-32C of
everything after it, int32 entry count, then entries of (int64 producer id, int16 epoch, int32
last sequence, int64 last offset, int32 offset delta, int64 timestamp, int32 coordinator epoch,
int64 current transaction first offset). Kafka writes one entry per producer (its last batch);
we write one per cached batch, oldest first, so all of them survive a restart (a reader that
keeps one entry per producer, as Kafka's does, ends with the last, the newest batch).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import crc32c

from pykraft.broker.log.errors import LogError
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import BatchHeader

SEQUENCE_MAX: Final = 2**31 - 1
PRODUCER_BATCHES_CACHED_MAX: Final = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
PRODUCERS_MAX: Final = 50_000
SNAPSHOT_VERSION: Final = 1
# Every entry a snapshot may hold: a larger count can only come from damage.
SNAPSHOT_ENTRIES_MAX: Final = PRODUCERS_MAX * PRODUCER_BATCHES_CACHED_MAX

_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START: Final = 6  # the CRC covers everything after version and crc
_NO_COORDINATOR_EPOCH: Final = -1
_NO_TXN_FIRST_OFFSET: Final = -1


class SnapshotCorruptError(ValueError):
    """The bytes of a producer snapshot are not a valid version-1 snapshot."""


def next_sequence(sequence: int, increment: int = 1) -> int:
    """The sequence `increment` records after `sequence`, wrapping to 0 after SEQUENCE_MAX (as
    Kafka's DefaultRecordBatch.incrementSequence)."""
    assert 0 <= sequence <= SEQUENCE_MAX and increment >= 0, (sequence, increment)
    return (sequence + increment) % (SEQUENCE_MAX + 1)


def previous_sequence(sequence: int, decrement: int) -> int:
    """The sequence `decrement` records before `sequence`, wrapping below 0 to SEQUENCE_MAX."""
    assert 0 <= sequence <= SEQUENCE_MAX and decrement >= 0, (sequence, decrement)
    return (sequence - decrement) % (SEQUENCE_MAX + 1)


def is_idempotent(header: BatchHeader) -> bool:
    """Whether the batch carries producer state (a producer id, and not a control batch)."""
    return header.producer_id >= 0 and not header.is_control


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Where one batch of a producer was written and which sequences it held."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int

    @staticmethod
    def of(header: BatchHeader) -> BatchMetadata:
        first = header.base_sequence
        return BatchMetadata(
            first_sequence=first,
            last_sequence=next_sequence(first, header.last_offset_delta),
            first_offset=header.base_offset,
            last_offset=header.last_offset,
            max_timestamp=header.max_timestamp,
        )


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    """One producer's epoch and its last batches in this epoch, oldest first (never empty)."""

    producer_id: int
    producer_epoch: int
    batches: tuple[BatchMetadata, ...]

    def __post_init__(self) -> None:
        assert 0 < len(self.batches) <= PRODUCER_BATCHES_CACHED_MAX, self
        for earlier, later in itertools.pairwise(self.batches):
            assert earlier.last_offset < later.first_offset, self

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset

    def duplicate_of(self, header: BatchHeader) -> BatchMetadata | None:
        """The cached batch that `header` repeats (same epoch and sequence range), if any."""
        if header.producer_epoch != self.producer_epoch:
            return None
        first = header.base_sequence
        last = next_sequence(first, header.last_offset_delta)
        for batch in self.batches:
            if batch.first_sequence == first and batch.last_sequence == last:
                return batch
        return None

    def after(self, header: BatchHeader) -> ProducerEntry:
        """This producer once `header` is written: a new epoch starts an empty batch cache."""
        batch = BatchMetadata.of(header)
        if header.producer_epoch != self.producer_epoch:
            return ProducerEntry(self.producer_id, header.producer_epoch, (batch,))
        kept = (*self.batches, batch)[-PRODUCER_BATCHES_CACHED_MAX:]
        return ProducerEntry(self.producer_id, self.producer_epoch, kept)


def _first_entry(header: BatchHeader) -> ProducerEntry:
    return ProducerEntry(header.producer_id, header.producer_epoch, (BatchMetadata.of(header),))


@dataclass(frozen=True)
class Duplicate:
    """A request whose every batch was written before: the offsets and largest timestamp of
    the original batches."""

    first_offset: int
    last_offset: int
    max_timestamp: int


class ProducerStateManager:
    """The producers of one partition replica, as of `end_offset`. Not thread-safe: the
    partition log calls it under its lock."""

    def __init__(self, end_offset: int, entries: Iterable[ProducerEntry] = ()) -> None:
        """The state after every batch below `end_offset`, holding `entries` (in any order:
        they are ordered here by their last offsets, which must lie below `end_offset`)."""
        assert end_offset >= 0, end_offset
        self._end_offset = end_offset
        self._producers: dict[int, ProducerEntry] = {}
        for entry in sorted(entries, key=lambda e: e.last_offset):
            assert entry.last_offset < end_offset, (entry, end_offset)
            assert entry.producer_id not in self._producers, entry
            self._producers[entry.producer_id] = entry
        assert len(self._producers) <= PRODUCERS_MAX, len(self._producers)

    @property
    def end_offset(self) -> int:
        """Every batch below this offset has been applied."""
        return self._end_offset

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def entries(self) -> tuple[ProducerEntry, ...]:
        """Every producer, the one that wrote least recently first."""
        return tuple(self._producers.values())

    # --- the leader's check ---

    def check_leader_append(
        self, headers: Sequence[BatchHeader], *, base_offset: int
    ) -> Duplicate | None:
        """Checks a produce request's batches (module docstring), which would be written from
        `base_offset` on, without changing the state. Returns where the original batches are
        when every batch is a duplicate, None when every batch is new; raises LogError
        otherwise (nothing may be written)."""
        assert base_offset >= self._end_offset, (base_offset, self._end_offset)
        pending: dict[int, ProducerEntry] = {}  # producers as earlier batches leave them
        duplicates: list[BatchMetadata] = []
        new_batches = 0
        next_offset = base_offset
        for client_header in headers:
            # The offsets the batch would get, so the pending entries are what `apply` makes.
            header = client_header._replace(base_offset=next_offset)
            next_offset = header.next_offset
            if not is_idempotent(header):
                new_batches += 1
                continue
            producer_id = header.producer_id
            entry = pending.get(producer_id)
            if entry is None:
                entry = self._producers.get(producer_id)
            duplicate = _check_batch(entry, header)
            if duplicate is not None:
                duplicates.append(duplicate)
                continue
            new_batches += 1
            pending[producer_id] = _first_entry(header) if entry is None else entry.after(header)
        if duplicates and new_batches:
            raise LogError(
                common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"the request mixes {len(duplicates)} batches written before with "
                f"{new_batches} new ones",
            )
        if not duplicates:
            return None
        return Duplicate(
            first_offset=min(d.first_offset for d in duplicates),
            last_offset=max(d.last_offset for d in duplicates),
            max_timestamp=max(d.max_timestamp for d in duplicates),
        )

    # --- what was written ---

    def apply(self, headers: Sequence[BatchHeader]) -> None:
        """Takes batches written to the log (offsets assigned, in offset order, from
        `end_offset` on) into the state, without checks (a follower's, or a replay's)."""
        for header in headers:
            assert header.base_offset >= self._end_offset, (header.base_offset, self._end_offset)
            self._end_offset = header.next_offset
            if not is_idempotent(header) or header.base_sequence < 0:
                continue  # the leader refuses the latter; nothing to learn from it
            entry = self._producers.pop(header.producer_id, None)
            updated = _first_entry(header) if entry is None else entry.after(header)
            self._producers[header.producer_id] = updated  # now the most recent writer
            if len(self._producers) > PRODUCERS_MAX:
                del self._producers[next(iter(self._producers))]

    # --- snapshots ---

    def encode_snapshot(self) -> bytes:
        """The state as a snapshot file's bytes (module docstring); the file's name carries
        `end_offset`."""
        body = bytearray(_SNAPSHOT_HEADER.size)
        count = 0
        for entry in self._producers.values():
            for batch in entry.batches:
                body += _SNAPSHOT_ENTRY.pack(
                    entry.producer_id,
                    entry.producer_epoch,
                    batch.last_sequence,
                    batch.last_offset,
                    batch.last_offset - batch.first_offset,
                    batch.max_timestamp,
                    _NO_COORDINATOR_EPOCH,
                    _NO_TXN_FIRST_OFFSET,
                )
                count += 1
        struct.pack_into(">i", body, _CRC_START, count)
        crc = crc32c.crc32c(memoryview(body)[_CRC_START:])
        struct.pack_into(">hI", body, 0, SNAPSHOT_VERSION, crc)
        return bytes(body)

    @staticmethod
    def from_snapshot(data: bytes, end_offset: int) -> ProducerStateManager:
        """The state a snapshot named `end_offset` holds; SnapshotCorruptError if the bytes are
        not a valid snapshot or describe batches at or above `end_offset`."""
        return ProducerStateManager(end_offset, decode_snapshot(data, end_offset))


def _check_batch(entry: ProducerEntry | None, header: BatchHeader) -> BatchMetadata | None:
    """The leader's rules for one batch against its producer's entry: the cached batch it
    repeats, None if it may be written, LogError if not."""
    producer_id, epoch, first = header.producer_id, header.producer_epoch, header.base_sequence
    if first < 0 or epoch < 0:
        raise LogError(
            common_pb2.INVALID_RECORD,
            f"producer {producer_id} sent epoch {epoch} and sequence {first}; neither may be "
            "negative",
        )
    if entry is None:
        if first != 0:
            raise LogError(
                common_pb2.UNKNOWN_PRODUCER_ID,
                f"this partition has no state for producer {producer_id}, whose batch starts at "
                f"sequence {first}, not 0",
            )
        return None
    duplicate = entry.duplicate_of(header)
    if duplicate is not None:
        return duplicate
    if epoch < entry.producer_epoch:
        raise LogError(
            common_pb2.INVALID_PRODUCER_EPOCH,
            f"producer {producer_id} sent epoch {epoch}, older than its current epoch "
            f"{entry.producer_epoch}",
        )
    expected = 0 if epoch > entry.producer_epoch else next_sequence(entry.last_sequence)
    if first != expected:
        raise LogError(
            common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"producer {producer_id} (epoch {epoch}) sent sequence {first}, expected {expected}",
        )
    return None


def decode_snapshot(data: bytes, end_offset: int) -> list[ProducerEntry]:
    """The producer entries of a snapshot named `end_offset`; SnapshotCorruptError when the
    bytes are not a valid version-1 snapshot of batches below `end_offset`."""
    if len(data) < _SNAPSHOT_HEADER.size:
        raise SnapshotCorruptError(f"{len(data)} bytes is too short for a snapshot")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise SnapshotCorruptError(f"version {version}, expected {SNAPSHOT_VERSION}")
    computed = crc32c.crc32c(memoryview(data)[_CRC_START:])
    if computed != crc:
        raise SnapshotCorruptError(f"crc {crc:#x}, computed {computed:#x}")
    if not 0 <= count <= SNAPSHOT_ENTRIES_MAX:
        raise SnapshotCorruptError(f"{count} entries")
    if len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
        raise SnapshotCorruptError(f"{len(data)} bytes do not hold {count} entries")
    runs: dict[int, list[tuple[int, BatchMetadata]]] = {}
    for fields in _SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[_SNAPSHOT_HEADER.size :]):
        producer_id, epoch, batch = _decoded_entry(fields, end_offset)
        run = runs.setdefault(producer_id, [])
        if run and run[-1][0] != epoch:
            raise SnapshotCorruptError(f"producer {producer_id} has entries of two epochs")
        run.append((epoch, batch))
    if len(runs) > PRODUCERS_MAX:
        raise SnapshotCorruptError(f"{len(runs)} producers, more than {PRODUCERS_MAX}")
    return [_decoded_producer(producer_id, run) for producer_id, run in runs.items()]


def _decoded_entry(fields: tuple[int, ...], end_offset: int) -> tuple[int, int, BatchMetadata]:
    producer_id, epoch, last_sequence, last_offset, delta, timestamp, _, _ = fields
    valid = (
        producer_id >= 0
        and epoch >= 0
        and 0 <= last_sequence <= SEQUENCE_MAX
        and 0 <= delta <= last_offset < end_offset
    )
    if not valid:
        raise SnapshotCorruptError(f"entry {fields} is out of range (end offset {end_offset})")
    first_sequence = previous_sequence(last_sequence, delta)
    first_offset = last_offset - delta
    batch = BatchMetadata(first_sequence, last_sequence, first_offset, last_offset, timestamp)
    return producer_id, epoch, batch


def _decoded_producer(producer_id: int, run: list[tuple[int, BatchMetadata]]) -> ProducerEntry:
    batches = tuple(batch for _, batch in run)
    ordered = all(a.last_offset < b.first_offset for a, b in itertools.pairwise(batches))
    if len(batches) > PRODUCER_BATCHES_CACHED_MAX or not ordered:
        raise SnapshotCorruptError(f"producer {producer_id}'s batches are not a valid cache")
    return ProducerEntry(producer_id, run[0][0], batches)
