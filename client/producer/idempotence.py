"""The idempotent producer's identity: a producer id and epoch from the cluster, and the next
sequence number of each partition (Kafka's TransactionManager, idempotence only).

Brokers keep, per producer id, the sequences of its last batches on each partition: a batch sent
again after a lost answer carries the same id, epoch and sequence, so the broker recognises it
and answers with the first attempt's offsets instead of writing it twice; a gap in the sequence
is refused (OUT_OF_ORDER_SEQUENCE_NUMBER). A batch keeps the sequence it was first stamped with
for all of its retries. The sender keeps up to 5 batches of a partition in flight and retries
them in order (module `in_flight`), so the broker appends each partition's batches in sequence.

When the brokers no longer know the producer (UNKNOWN_PRODUCER_ID) or refused a sequence, the
identity is reset once nothing is in flight: a new id from the cluster and every sequence back
to 0 (KIP-360's epoch bump, done with a fresh id). A batch that was stamped with the old id is
stamped again; if its earlier attempt was written but its answer lost, that one batch may be
written twice, as with Kafka after an epoch bump.

Used by the sender thread only: not thread-safe.
"""

from __future__ import annotations

from typing import Final

from pykraft.client.types import TopicPartition
from pykraft.proto.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

# Sequences are int32 and wrap to 0 after the largest, as Kafka's do.
SEQUENCE_MAX: Final = 2**31 - 1


class ProducerIdentity:
    """The producer id and epoch in use, and each partition's next sequence."""

    def __init__(self) -> None:
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self._next_sequence: dict[TopicPartition, int] = {}
        self.reset_wanted = False
        self.requesting = False

    @property
    def ready(self) -> bool:
        """Whether batches may be stamped and sent: an id is held and no reset is due."""
        return self.producer_id != NO_PRODUCER_ID and not self.reset_wanted

    def take_sequence(self, tp: TopicPartition, record_count: int) -> int:
        """The first sequence of a new batch of `record_count` records on `tp`, and moves the
        partition's next sequence past it."""
        assert self.ready, "no producer id to stamp batches with"
        assert record_count > 0, record_count
        first = self._next_sequence.get(tp, 0)
        self._next_sequence[tp] = (first + record_count) % (SEQUENCE_MAX + 1)
        return first

    def adopt(self, producer_id: int, producer_epoch: int) -> None:
        """Takes a new id from the cluster; every partition's sequence starts again at 0."""
        assert producer_id >= 0 and producer_epoch >= 0, (producer_id, producer_epoch)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self._next_sequence.clear()
        self.reset_wanted = False
        self.requesting = False

    def request_reset(self) -> None:
        """The brokers lost or refused this producer's state: get a new id once idle."""
        self.reset_wanted = True
