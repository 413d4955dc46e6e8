"""Helpers shared by the producer-state tests: idempotent batches whose values name the producer,
epoch and sequence, states built from a history of such batches, the table of the leader's rules
(what a batch sent after a history must get), and leader appends and crashes of a partition log.
"""

from __future__ import annotations

from collections.abc import Sequence

from pykraft.broker.log import PartitionLog
from pykraft.broker.log.producer_state import ProducerStateManager, next_sequence
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import BatchHeader, build_batch

from .support import NOW_MS

Sent = tuple[int, int, int, int]  # producer id, epoch, first sequence, record count


def idempotent_batch(
    producer_id: int, epoch: int, sequence: int, count: int = 1, *, base_offset: int = 0
) -> bytes:
    """A batch of `count` records whose values name the producer, epoch and sequence, so a
    record written twice shows up twice."""
    values = [
        b"p%d-e%d-s%d" % (producer_id, epoch, next_sequence(sequence, i) if sequence >= 0 else i)
        for i in range(count)
    ]
    return build_batch(
        [(NOW_MS, None, value) for value in values],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        base_offset=base_offset,
    )


def header_of(sent: Sent, base_offset: int = 0) -> BatchHeader:
    return BatchHeader.parse(idempotent_batch(*sent, base_offset=base_offset))


def state_after(history: Sequence[Sent]) -> ProducerStateManager:
    """A fresh state that applied `history`, written back to back from offset 0."""
    state = ProducerStateManager(0)
    for sent in history:
        state.apply([header_of(sent, state.end_offset)])
    return state


NEW = "new"
ONE_BY_ONE = [(1, 0, sequence, 1) for sequence in range(6)]
RULES: list[tuple[str, list[Sent], Sent, object]] = [
    ("unknown producer starting at 0", [], (1, 0, 0, 3), NEW),
    ("unknown producer past 0", [], (1, 0, 5, 1), common_pb2.UNKNOWN_PRODUCER_ID),
    ("another producer's state does not count", [(2, 0, 0, 3)], (1, 0, 3, 1),
     common_pb2.UNKNOWN_PRODUCER_ID),
    ("next in sequence", [(1, 0, 0, 3)], (1, 0, 3, 2), NEW),
    ("a gap", [(1, 0, 0, 3)], (1, 0, 4, 1), common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("behind, not a cached batch", [(1, 0, 0, 3)], (1, 0, 1, 1),
     common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("same first sequence, other last", [(1, 0, 0, 3)], (1, 0, 0, 2),
     common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("duplicate of the last batch", [(1, 0, 0, 3), (1, 0, 3, 2)], (1, 0, 3, 2), (3, 4)),
    ("duplicate of the oldest of five", ONE_BY_ONE[:5], (1, 0, 0, 1), (0, 0)),
    ("duplicate of the sixth batch back", ONE_BY_ONE, (1, 0, 0, 1),
     common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("duplicate of the fifth batch back", ONE_BY_ONE, (1, 0, 1, 1), (1, 1)),
    ("older epoch", [(1, 2, 0, 1)], (1, 1, 1, 1), common_pb2.INVALID_PRODUCER_EPOCH),
    ("older epoch repeating a batch", [(1, 2, 0, 1)], (1, 1, 0, 1),
     common_pb2.INVALID_PRODUCER_EPOCH),
    ("newer epoch from 0", [(1, 0, 0, 3)], (1, 1, 0, 1), NEW),
    ("newer epoch not from 0", [(1, 0, 0, 3)], (1, 1, 3, 1),
     common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("a batch of the old epoch after a bump", [(1, 0, 0, 3), (1, 1, 0, 1)], (1, 0, 0, 3),
     common_pb2.INVALID_PRODUCER_EPOCH),
    ("negative sequence", [], (1, 0, -1, 1), common_pb2.INVALID_RECORD),
    ("no producer id: no checks", [(1, 0, 0, 3)], (-1, -1, -1, 2), NEW),
]  # fmt: skip


def append(log: PartitionLog, *sent: Sent) -> tuple[int, int, bool]:
    """(first offset, last offset, duplicate) of a leader append of one request."""
    data = b"".join(idempotent_batch(*s) for s in sent)
    info = log.append_as_leader(data, leader_epoch=0, now_ms=NOW_MS)
    return info.first_offset, info.last_offset, info.duplicate


def crash(log: PartitionLog) -> None:
    """Closes the files as a killed process leaves them: no snapshot, no clean marker."""
    log._local.close()
