"""Which batch of a partition may be sent now, with several of them in flight at once (Kafka's
max.in.flight.requests.per.connection under idempotence, and the ordering rules its
RecordAccumulator and TransactionManager keep on retries).

An idempotent producer keeps up to `per_partition_max` (at most 5, the batches a broker
remembers per producer for duplicates) batches of a partition unresolved: sent and neither
acknowledged nor failed for good. Order still holds because the broker checks sequences: a batch
that reaches it before an earlier one is refused OUT_OF_ORDER_SEQUENCE_NUMBER and nothing is
written. The rules, per partition, over the batches in the order they were first sent:

- a batch never sent before may go while fewer than `per_partition_max` are unresolved;
- a batch sent before (a retry) goes only when it is the first unresolved one, so retries go one
  at a time, oldest first (the sender puts them back in its queue in send order);
- OUT_OF_ORDER_SEQUENCE_NUMBER is expected, and the batch retried, when the batch was sent
  while an earlier one was unresolved: that one failed or was overtaken, and this one was
  refused whole. Sent with nothing unresolved before it, the broker really lost a sequence.
  So is UNKNOWN_PRODUCER_ID, which a broker answers a sequence above 0 while it has nothing of
  the producer on the partition: the partition's first batch was overtaken. The broker's
  thread pool may serve a connection's requests out of order, so overtaking does happen.

A producer without idempotence has one batch per partition in flight (`per_partition_max` 1):
with no sequences to check, a retry could otherwise overtake a later batch.

Pure: no clock, no I/O; used by the sender thread only (not thread-safe).
"""

from __future__ import annotations

from itertools import count

from pykraft.client.producer.accumulator import ProducerBatch
from pykraft.client.types import TopicPartition


class InFlightBatches:
    """Per partition, the unresolved batches in the order they were first sent."""

    def __init__(self, per_partition_max: int) -> None:
        assert per_partition_max >= 1, per_partition_max
        self._per_partition_max = per_partition_max
        self._unresolved: dict[TopicPartition, list[ProducerBatch]] = {}
        # Batches last sent while an earlier batch of their partition was unresolved.
        self._sent_behind: set[ProducerBatch] = set()
        self._send_orders = count()

    def may_send(self, batch: ProducerBatch) -> bool:
        """Whether `batch`, the head of its partition's queue, may be sent now."""
        line = self._unresolved.get(batch.tp)
        if not line:
            return True
        if batch.send_order >= 0:
            return line[0] is batch
        return len(line) < self._per_partition_max

    def sent(self, batch: ProducerBatch) -> None:
        """`batch` went out (the first time, or again). A first send numbers it
        (`send_order`, the order the sender's queue keeps retries in)."""
        line = self._unresolved.setdefault(batch.tp, [])
        if batch.send_order < 0:
            assert len(line) < self._per_partition_max, (batch.tp, len(line))
            batch.send_order = next(self._send_orders)
            line.append(batch)
        else:
            assert line[0] is batch, f"a retry of {batch.tp} overtook an earlier batch"
        if line[0] is batch:
            self._sent_behind.discard(batch)
        else:
            self._sent_behind.add(batch)

    def resolved(self, batch: ProducerBatch) -> None:
        """`batch` was acknowledged or failed for good: later batches move up."""
        line = self._unresolved.get(batch.tp)
        if line and batch in line:
            line.remove(batch)
            if not line:
                del self._unresolved[batch.tp]
        self._sent_behind.discard(batch)

    def sent_behind(self, batch: ProducerBatch) -> bool:
        """Whether `batch`'s last send went out while an earlier batch of its partition was
        unresolved. A refusal of its sequence (OUT_OF_ORDER_SEQUENCE_NUMBER, or
        UNKNOWN_PRODUCER_ID ahead of the partition's first batch) is then explained by that
        batch, and `batch` is retried in order; sent first in line, the broker really lost the
        sequence or the producer."""
        return batch in self._sent_behind

    def unresolved_count(self, tp: TopicPartition) -> int:
        return len(self._unresolved.get(tp, ()))
