"""The replicated state of a controller: committed quorum batches replayed into the metadata image.

Every controller, active or standby, runs the same `apply` on the same committed Raft entries in
the same order, so all hold equal images at equal offsets. Offsets are assigned here, one per
record, in commit order; a batch rejected by the epoch check (see `batch.py`) takes no offsets and
changes nothing.

The state machine keeps a bounded tail of recent batches so `MetadataFetch` can serve deltas; a
broker further behind gets the image written out as a snapshot. It runs on the controller thread
only.
"""

from __future__ import annotations

import itertools
import struct
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from pykraft.metadata_log.codec import encode_chunks
from pykraft.metadata_log.delta import replay_all
from pykraft.metadata_log.image import MetadataImage
from pykraft.metadata_log.image_loader import image_of_chunks
from pykraft.quorum.batch import BatchKind, QuorumBatch, record_batch_of
from pykraft.server_common.gc_pauses import long_lived_build

# image offset, image epoch, active epoch, active leader id: a snapshot's first part
_SNAPSHOT_HEADER = struct.Struct(">qiii")
# The largest part of a snapshot after its header (one record larger travels alone): what
# writing or restoring a snapshot holds of its encoding at once.
SNAPSHOT_CHUNK_BYTES_MAX: Final = 1024 * 1024
# Batches this node appended, kept decoded until they apply (`remember`): beyond these bounds
# the oldest are decoded again when they apply, which costs time, never correctness.
REMEMBERED_BATCHES_MAX = 16
REMEMBERED_BYTES_MAX = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Remembered:
    """A batch this node appended, and when it decided the batch's records onto an image:
    that image (`base`) and the image after them (`result`)."""

    batch: QuorumBatch
    replayed: tuple[MetadataImage, MetadataImage] | None


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """A batch as it stands in the metadata log; `records` is the codec's encoding, ready to
    serve."""

    base_offset: int
    epoch: int
    record_count: int
    records: bytes

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1


@dataclass(frozen=True, slots=True)
class Applied:
    """`apply` result for a batch that landed."""

    base_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class Rejected:
    """`apply` result for a batch decided under an epoch that is no longer the active one."""

    epoch: int
    active_epoch: int


class MetadataStateMachine:
    """Implements the Raft `StateMachine` protocol for the metadata log."""

    def __init__(self, *, tail_records_max: int) -> None:
        assert tail_records_max > 0
        self.tail_records_max = tail_records_max
        self.image = MetadataImage.EMPTY
        self.active_epoch = -1
        self.active_leader_id = -1
        self._tail: deque[CommittedBatch] = deque()
        self._tail_record_count = 0
        # Offset of the first record the tail can serve: a fetch from before it needs a snapshot.
        self._tail_start_offset = 0
        self._remembered: OrderedDict[bytes, _Remembered] = OrderedDict()
        self._remembered_bytes = 0

    @property
    def last_offset(self) -> int:
        """Offset of the last committed record (-1 when the log is empty)."""
        return self.image.offset

    @property
    def next_offset(self) -> int:
        return self.image.offset + 1

    def remember(
        self,
        payload: bytes,
        batch: QuorumBatch,
        replayed: tuple[MetadataImage, MetadataImage] | None = None,
    ) -> None:
        """Keeps `batch`, whose encoding is `payload`, until a committed entry of the same bytes
        applies, so the active controller does not decode again what it just decided: decoding
        a 9,000-partition CreateTopics took 68 ms of its 86 ms apply, on the thread that must
        heartbeat. Equal bytes are equal records (the codec is canonical).

        `replayed` is `(base, result)` when the caller replayed the batch's records onto `base`
        (the active controller's pending image) and got `result`, at the offset and epoch the
        batch applies at: applying onto that very `base` object takes `result` instead of
        replaying the records again (another 31 ms per 9,000 partitions). Replay is a function
        of the image and the records, so the result is the one a follower computes."""
        if payload in self._remembered:
            return
        self._remembered[payload] = _Remembered(batch, replayed)
        self._remembered_bytes += len(payload)
        while (
            len(self._remembered) > REMEMBERED_BATCHES_MAX
            or self._remembered_bytes > REMEMBERED_BYTES_MAX
        ):
            self._forget(next(iter(self._remembered)))

    def _forget(self, payload: bytes) -> _Remembered | None:
        remembered = self._remembered.pop(payload, None)
        if remembered is not None:
            self._remembered_bytes -= len(payload)
        return remembered

    def apply(self, payload: bytes) -> Applied | Rejected:
        remembered = self._forget(payload)
        batch = remembered.batch if remembered is not None else QuorumBatch.decode(payload)
        if not self._admits(batch):
            return Rejected(batch.epoch, self.active_epoch)
        if batch.kind is BatchKind.LEADER_CHANGE:
            self.active_epoch = batch.epoch
            self.active_leader_id = batch.leader_id
        base_offset = self.next_offset
        last_offset = base_offset + len(batch.records) - 1
        if batch.records:
            replayed = remembered.replayed if remembered is not None else None
            if (
                replayed is not None
                and replayed[0] is self.image
                and (replayed[1].offset, replayed[1].epoch) == (last_offset, batch.epoch)
            ):
                self.image = replayed[1]
            else:
                delta = replay_all(self.image, batch.records)
                self.image = delta.apply(offset=last_offset, epoch=batch.epoch)
            record_batch = record_batch_of(payload)
            self._retain(CommittedBatch(base_offset, batch.epoch, len(batch.records), record_batch))
        return Applied(base_offset, last_offset)

    def _admits(self, batch: QuorumBatch) -> bool:
        if batch.kind is BatchKind.LEADER_CHANGE:
            return batch.epoch > self.active_epoch
        return batch.epoch == self.active_epoch and batch.leader_id == self.active_leader_id

    def _retain(self, batch: CommittedBatch) -> None:
        self._tail.append(batch)
        self._tail_record_count += batch.record_count
        while self._tail_record_count > self.tail_records_max and len(self._tail) > 1:
            dropped = self._tail.popleft()
            self._tail_record_count -= dropped.record_count
            self._tail_start_offset = dropped.last_offset + 1

    def batches_after(self, offset: int, *, bytes_max: int) -> list[CommittedBatch] | None:
        """Committed batches holding records past `offset`, at least one, then up to `bytes_max`.

        Returns None when records past `offset` are no longer retained: the caller needs a snapshot.
        """
        if offset + 1 < self._tail_start_offset:
            return None
        found: list[CommittedBatch] = []
        size = 0
        for batch in self._tail:
            if batch.last_offset <= offset:
                continue
            if found and size + len(batch.records) > bytes_max:
                break
            found.append(batch)
            size += len(batch.records)
        return found

    def snapshot(self) -> Iterator[bytes]:
        """The state as of now, in parts drawn one at a time: a header, then the image's records
        in batches of at most SNAPSHOT_CHUNK_BYTES_MAX. Applies after this call do not change
        what the parts hold (the image is immutable)."""
        header = _SNAPSHOT_HEADER.pack(
            self.image.offset, self.image.epoch, self.active_epoch, self.active_leader_id
        )
        return _snapshot_parts(header, self.image)

    def restore(self, parts: Iterable[bytes]) -> None:
        """Replaces the state with a snapshot's `parts`, replayed as they are drawn; when
        drawing or replaying one raises, the state is left as it was. The first part may hold
        records after the header: a snapshot written before chunks is that one part."""
        parts = iter(parts)
        first = next(parts, b"")
        if len(first) < _SNAPSHOT_HEADER.size:
            raise ValueError(f"a snapshot opens with a {_SNAPSHOT_HEADER.size}-byte header")
        offset, epoch, active_epoch, leader_id = _SNAPSHOT_HEADER.unpack_from(first)
        records = first[_SNAPSHOT_HEADER.size :]
        chunks = itertools.chain((records,) if records else (), parts)
        with long_lived_build():
            self.image = image_of_chunks(chunks, offset=offset, epoch=epoch)
        self.active_epoch = active_epoch
        self.active_leader_id = leader_id
        self._tail.clear()
        self._tail_record_count = 0
        self._tail_start_offset = offset + 1


def _snapshot_parts(header: bytes, image: MetadataImage) -> Iterator[bytes]:
    yield header
    yield from encode_chunks(image.records(), SNAPSHOT_CHUNK_BYTES_MAX)
