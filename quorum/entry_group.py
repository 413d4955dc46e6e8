"""Group commit: the writes the active controller decided and has not appended yet, gathered
into its next Raft entry (issue 18 §2.3; Kafka's controller appends through the Raft client's
batch accumulator, which holds records up to `controller.quorum.append.linger.ms`).

One entry per write costs a Raft round trip, an fsync on each voter and an apply per write; under
many small concurrent writes (heartbeats, CreateTopics of one topic) those costs, not the records,
bound the rate. Writes decided while an earlier entry of this controller is being committed wait
in an `OpenEntry` and leave together once that entry commits.

What a caller may rely on:
- An entry holds whole writes in the order they were decided, each write's records together and
  in order, so applying the entry is applying the writes one after the other; the entry commits
  or fails whole, and with it every write in it.
- An entry holds at most `EntryLimits.operations_max` writes and `ENTRY_RECORDS_MAX` records
  (unless one write alone holds more) and stays under `EntryLimits.bytes_max` (RaftConfig's
  `entry_bytes_max`); a write that alone does not fit that is refused before it changes anything
  (`too_large`).
- A write that wrote nothing but decided on records not yet committed is answered with the last
  entry holding them (Kafka's controller waits for the last written offset the same way).
- `due` says when the entry leaves: at once when none of this controller's entries is in flight
  (an idle controller adds no wait), otherwise when it is full or has waited `linger_ms`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from google.protobuf.message import Message

from pykraft.metadata_log.codec import batch_of_frames
from pykraft.metadata_log.records import Record
from pykraft.quorum.batch import PAYLOAD_OVERHEAD_BYTES_MAX, BatchKind, QuorumBatch, encode_payload

# Records an entry holds at most, unless one write alone holds more (Kafka's controller: 10,000
# records per batch). A follower applies an entry on the thread that also answers Raft: several
# CreateTopics of 9,000 partitions each in one entry held it past the election timeout.
ENTRY_RECORDS_MAX: Final = 10_000


@dataclass(frozen=True)
class PendingWrite:
    """A decided write waiting for its entry to commit. `request_id` None: nobody waits (a write
    the controller decided for itself)."""

    request_id: int | None
    response: Message
    response_cls: type[Message]


@dataclass(frozen=True)
class EntryLimits:
    operations_max: int
    bytes_max: int
    linger_ms: int

    def too_large(self, frames_bytes: int) -> bool:
        """Whether a write whose records encode to `frames_bytes` cannot fit any entry."""
        return PAYLOAD_OVERHEAD_BYTES_MAX + frames_bytes >= self.bytes_max


class OpenEntry:
    """The next entry while it gathers writes; see the module docstring."""

    def __init__(self, opened_ms: int, limits: EntryLimits) -> None:
        self.opened_ms = opened_ms
        self.writes: list[PendingWrite] = []  # in the order decided, those without records too
        self._operations = 0  # the writes with records
        self._limits = limits
        self._records: list[Record] = []
        self._frames = bytearray()

    def fits(self, frames_bytes: int, record_count: int) -> bool:
        """Whether a write of `record_count` records encoded to `frames_bytes` may still join;
        always, into an entry with none yet."""
        if not self._records:
            return True
        if self._operations >= self._limits.operations_max:
            return False
        if len(self._records) + record_count > ENTRY_RECORDS_MAX:
            return False
        size = PAYLOAD_OVERHEAD_BYTES_MAX + len(self._frames) + frames_bytes
        return size < self._limits.bytes_max

    def add(self, records: tuple[Record, ...], frames: bytes, write: PendingWrite) -> None:
        """Adds a write: its `records`, encoded as `frames` (`encode_record_frames`)."""
        assert records, "a write without records needs no entry"
        assert self.fits(len(frames), len(records)), "add() past the entry's limits"
        self._records.extend(records)
        self._frames += frames
        self._operations += 1
        self.writes.append(write)

    def add_reader(self, write: PendingWrite) -> None:
        """Adds a write that decided on this entry's records but wrote none (a CreateTopics of a
        topic an earlier write created): answered with this entry, never before it commits."""
        self.writes.append(write)

    def due(self, now_ms: int, *, entries_in_flight: int) -> bool:
        if entries_in_flight == 0 or self._operations >= self._limits.operations_max:
            return True
        if len(self._records) >= ENTRY_RECORDS_MAX:
            return True
        return now_ms >= self.wake_at_ms

    @property
    def wake_at_ms(self) -> int:
        """When the linger ends and the entry leaves whatever is in flight."""
        return self.opened_ms + self._limits.linger_ms

    def seal(self, epoch: int, leader_id: int) -> tuple[QuorumBatch, bytes]:
        """The entry as a batch decided in `epoch` by `leader_id`, and its payload (the same
        bytes as `batch.encode()`, with each record encoded only once)."""
        records = tuple(self._records)
        record_batch = batch_of_frames(len(records), bytes(self._frames))
        payload = encode_payload(BatchKind.RECORDS, epoch, leader_id, record_batch)
        return QuorumBatch(BatchKind.RECORDS, epoch, leader_id, records), payload
