"""Which batch of a partition may be sent now, with several of them in flight at once (Kafka's
max.in.flight.requests.per.connection under idempotence, and the ordering rules its
RecordAccumulator and TransactionManager keep on retries).

An idempotent producer keeps up to `per_partition_max` (at most 5, the batches a broker
remembers per producer for duplicates) batches of a partition in its window: the oldest
unresolved batch (sent and neither acknowledged nor failed for good) and every batch sent after
it, answered or not. Answers may come back out of order (a lost answer, the broker's thread
pool), and a batch answered early must still count: otherwise 5 more could be written before an
unanswered batch's retry, which the broker would no longer recognise as a duplicate. (Kafka's
answers come back in order on a connection, which keeps the same bound.) Order still holds
because the broker checks sequences: a batch that reaches it before an earlier one is refused
OUT_OF_ORDER_SEQUENCE_NUMBER and nothing is written. The rules, per partition, over the batches
in the order they were first sent:

- a batch never sent before may go while the window holds fewer than `per_partition_max`;
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
    """Per partition, the window of batches (module docstring) in the order they were first
    sent."""

    def __init__(self, per_partition_max: int) -> None:
        assert per_partition_max >= 1, per_partition_max
        self._per_partition_max = per_partition_max
        # Per partition, its window; its first batch is always unresolved.
        self._windows: dict[TopicPartition, list[ProducerBatch]] = {}
        self._answered_early: set[ProducerBatch] = set()  # resolved, in a window behind others
        # Batches last sent while an earlier batch of their partition was unresolved.
        self._sent_behind: set[ProducerBatch] = set()
        self._send_orders = count()

    def may_send(self, batch: ProducerBatch, taken: int = 0) -> bool:
        """Whether `batch`, the head of its partition's queue, may be sent now, in the same
        request as the `taken` batches of its partition drained before it. A retry goes alone
        (never behind others in one request: were they written, the broker would refuse the
        mix of new and duplicate batches)."""
        window = self._windows.get(batch.tp)
        if batch.send_order >= 0:
            return taken == 0 and (not window or window[0] is batch)
        return len(window or ()) + taken < self._per_partition_max

    def sent(self, batch: ProducerBatch) -> None:
        """`batch` went out (the first time, or again). A first send numbers it
        (`send_order`, the order the sender's queue keeps retries in)."""
        window = self._windows.setdefault(batch.tp, [])
        if batch.send_order < 0:
            assert len(window) < self._per_partition_max, (batch.tp, len(window))
            batch.send_order = next(self._send_orders)
            window.append(batch)
        else:
            assert window[0] is batch, f"a retry of {batch.tp} overtook an earlier batch"
        if window[0] is batch:
            self._sent_behind.discard(batch)
        else:
            self._sent_behind.add(batch)

    def resolved(self, batch: ProducerBatch) -> None:
        """`batch` was acknowledged or failed for good: the window starts at the next
        unresolved batch (one answered early stays in it until those before it resolve)."""
        self._sent_behind.discard(batch)
        window = self._windows.get(batch.tp)
        if not window or batch not in window:
            return
        if window[0] is not batch:
            self._answered_early.add(batch)
            return
        del window[0]
        while window and window[0] in self._answered_early:
            self._answered_early.discard(window.pop(0))
        if not window:
            del self._windows[batch.tp]

    def sent_behind(self, batch: ProducerBatch) -> bool:
        """Whether `batch`'s last send went out while an earlier batch of its partition was
        unresolved. A refusal of its sequence (OUT_OF_ORDER_SEQUENCE_NUMBER, or
        UNKNOWN_PRODUCER_ID ahead of the partition's first batch) is then explained by that
        batch, and `batch` is retried in order; sent first in line, the broker really lost the
        sequence or the producer."""
        return batch in self._sent_behind

    def unresolved_count(self, tp: TopicPartition) -> int:
        """The batches of `tp`'s window not resolved yet."""
        return sum(1 for b in self._windows.get(tp, ()) if b not in self._answered_early)
