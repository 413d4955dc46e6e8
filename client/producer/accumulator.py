"""Per-partition queues of record batches, bounded by `buffer_memory`, drained by the sender.

Producer threads `append`; the sender thread asks which partitions are `ready` (a batch is full,
its linger expired, or a flush or close is under way), `drain`s the batches of each partition
that may go together (one Produce request carries them all, see `sender`), and
`deallocate`s each batch once it is done, which frees its share of the buffer. All times are
passed in as `now_ms` (monotonic milliseconds).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from pykraft.client.clock import monotonic_ms
from pykraft.client.errors import RequestTimedOutError
from pykraft.client.producer import open_batches
from pykraft.client.producer.future import BatchResult
from pykraft.client.producer.open_batches import OpenBatch
from pykraft.client.types import TopicPartition
from pykraft.proto import extensions
from pykraft.proto.record_batch import NO_PRODUCER_ID, Compression

# The per-record path (open_batches.py): compiled unless disabled or not built
# (pykraft.proto.extensions). Read when an accumulator is made.
open_batches_python = open_batches.OpenBatches
OpenBatches: type[open_batches.OpenBatches] = open_batches_python
_compiled = extensions.load("pykraft.client.producer._open_batches")
if _compiled is not None:
    OpenBatches = _compiled.OpenBatches


class BufferExhaustedError(RequestTimedOutError):
    """`send` waited `max_block_ms` for buffer space that never came (Kafka's
    BufferExhaustedException, a TimeoutException): the cluster is slower than the producer."""


@dataclass(eq=False, slots=True)
class ProducerBatch:
    """One batch under construction or in flight; its records' futures share `result`. Slotted:
    no dict for the garbage collector to track per batch in flight (see future.BatchResult)."""

    tp: TopicPartition
    # Its records, encoded as they were appended (compiled unless disabled, like OpenBatches).
    builder: OpenBatch
    created_ms: int
    attempts: int = 0
    retry_at_ms: int = 0
    # The batch's bytes, built once at its first send and sent unchanged by every retry (an
    # idempotent producer's retry must carry the same sequence), and the producer id in them.
    records: bytes | None = None
    producer_id: int = NO_PRODUCER_ID
    # Numbered at the batch's first send (`in_flight.InFlightBatches`); -1 until then. Retries
    # wait in their queue in this order.
    send_order: int = -1

    @property
    def result(self) -> BatchResult:
        return self.builder.result

    @property
    def done(self) -> bool:
        return self.result.is_done()

    def seal(self, producer_id: int, producer_epoch: int, base_sequence: int) -> bytes:
        """Builds the bytes to send, stamped with the idempotent producer's identity
        (NO_PRODUCER_ID when not idempotent)."""
        if producer_id != NO_PRODUCER_ID:
            self.builder.set_producer(producer_id, producer_epoch, base_sequence)
        self.producer_id = producer_id
        self.records = self.builder.build()
        return self.records

    def complete(self, base_offset: int, log_append_time_ms: int) -> None:
        """Resolves every record's future; offsets are consecutive from `base_offset`."""
        self.result.set(base_offset, log_append_time_ms, None)

    def fail(self, error: BaseException) -> None:
        self.result.set(-1, -1, error)


@dataclass(frozen=True)
class DeliveryCounts:
    """Records whose batches are done, counted per batch (Kafka's record-send-total and
    record-error-total), and the last error that failed one: what a caller tracking a large
    run reads instead of a callback per record."""

    records_delivered: int
    records_failed: int
    last_error: BaseException | None


class Readiness(NamedTuple):
    """What `RecordAccumulator.ready` found."""

    ready: list[TopicPartition]  # a batch to send now
    # A batch that only waits for its linger: it may go along with a request sent anyway.
    lingering: list[TopicPartition]
    next_ms: int  # how long until a batch may be ready


class RecordAccumulator:
    """Thread-safe; producer threads append, one sender thread drains."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        buffer_memory: int,
        compression: Compression,
        wakeup: threading.Event,
        max_request_size: int = 1048576,
    ) -> None:
        assert batch_size > 0 and linger_ms >= 0 and buffer_memory > 0 and max_request_size > 0
        self._batch_size = batch_size
        self._linger_ms = linger_ms
        self._buffer_memory = buffer_memory
        self._wakeup = wakeup
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        # Per partition, the builder of its last queued batch while that batch was never
        # drained: the one appends go to.
        self._open: dict[TopicPartition, OpenBatch] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._flushes_in_progress = 0
        self._delivery_counts = DeliveryCounts(0, 0, None)
        self._lock = threading.Lock()
        self._space_freed = threading.Condition(self._lock)
        self._all_done = threading.Condition(self._lock)
        # The buffer's byte count and the closing flag live there, read and changed under _lock.
        self._batches = OpenBatches(
            self._open,
            self._lock,
            batch_size=batch_size,
            buffer_memory=buffer_memory,
            max_request_size=max_request_size,
            compression=compression,
            wakeup=wakeup,
            wait_for_space=self._wait_for_space,
            register=self._register,
        )
        # Adds one record: the compiled per-record path itself when built, with no frame of
        # ours around it (see OpenBatches.append).
        self.append = self._batches.append

    @property
    def open_batches(self) -> open_batches.OpenBatches:
        """The per-record path's batches (what `append` is bound to): the producer's
        SendPath appends to them."""
        return self._batches

    def _register(self, builder: OpenBatch) -> None:
        """Holding the lock: queues a new open batch around `builder`."""
        tp = builder.tp
        batch = ProducerBatch(tp, builder, created_ms=monotonic_ms())
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        queue.append(batch)
        self._open[tp] = builder
        self._incomplete.add(batch)

    def _wait_for_space(self, size: int, max_block_ms: int) -> None:
        """Holding the lock: waits up to `max_block_ms` until `size` bytes of buffer are free;
        BufferExhaustedError after that, RuntimeError if the producer closes meanwhile."""
        deadline = time.monotonic() + max_block_ms / 1000
        batches = self._batches
        while batches.used_bytes + size > self._buffer_memory and not batches.closing:
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                raise BufferExhaustedError(
                    f"waited {max_block_ms} ms for {size} bytes of buffer_memory "
                    f"({self._buffer_memory} bytes, all in use): the cluster is not "
                    "keeping up; raise buffer_memory or max_block_ms, or send slower"
                )
            self._space_freed.wait(remaining_s)
        if batches.closing:
            raise RuntimeError("the producer is closed")

    def ready(self, now_ms: int) -> Readiness:
        """Partitions with a batch to send now, those whose batch only lingers, and how long
        until the next may be ready (ms)."""
        ready: list[TopicPartition] = []
        lingering: list[TopicPartition] = []
        next_ms = self._linger_ms if self._linger_ms > 0 else 100
        with self._lock:
            hurry = self._flushes_in_progress > 0 or self._batches.closing
            for tp, queue in self._queues.items():
                if not queue:
                    continue
                first = queue[0]
                if first.retry_at_ms > now_ms:
                    next_ms = min(next_ms, first.retry_at_ms - now_ms)
                    continue
                if first.attempts > 0 or self._is_ready(queue, now_ms, hurry=hurry):
                    ready.append(tp)
                else:
                    lingering.append(tp)
                    next_ms = min(next_ms, first.created_ms + self._linger_ms - now_ms)
        return Readiness(ready, lingering, max(next_ms, 1))

    def drain(
        self,
        tps: Iterable[TopicPartition],
        may_send: Callable[[ProducerBatch, int], bool],
        now_ms: int,
    ) -> list[ProducerBatch]:
        """Takes the batches to send of each partition, in the order given: from the head of
        its queue, each batch `may_send` allows (told how many of its partition were taken
        before it) while it is ready too (full, its linger over, or a flush or close under way;
        the head is, being asked for). A partition's batches stay in queue order, together. A
        drained batch takes no more records."""
        with self._lock:
            hurry = self._flushes_in_progress > 0 or self._batches.closing
            drained: list[ProducerBatch] = []
            for tp in tps:
                queue = self._queues.get(tp)
                taken = 0
                while queue and may_send(queue[0], taken):
                    if taken and not self._is_ready(queue, now_ms, hurry=hurry):
                        break
                    batch = queue.popleft()
                    drained.append(batch)
                    taken += 1
                    if batch.send_order >= 0:
                        break  # a retry goes alone (InFlightBatches.may_send)
            self._close_batches(drained)
            return drained

    def _is_ready(self, queue: deque[ProducerBatch], now_ms: int, *, hurry: bool) -> bool:
        """Holding the lock: whether the head of `queue` may go now (retries aside): a batch
        with a successor is full; the last one is when filled to batch_size, after its linger,
        or in a hurry."""
        first = queue[0]
        if hurry or len(queue) > 1 or first.builder.size_bytes >= self._batch_size:
            return True
        return first.created_ms + self._linger_ms <= now_ms

    def _close_batches(self, batches: Iterable[ProducerBatch]) -> None:
        """Holding the lock: batches leaving their queues take no more records."""
        for batch in batches:
            if self._open.get(batch.tp) is batch.builder:
                del self._open[batch.tp]

    def reenqueue(self, batch: ProducerBatch, now_ms: int, backoff_ms: int) -> None:
        """Puts a failed batch back near the head of its queue, to go again after a backoff:
        after the retries that were first sent before it, ahead of everything else (Kafka's
        insertInSequenceOrder; answers of pipelined batches may come back in any order)."""
        assert batch.send_order >= 0, "only a sent batch is retried"
        batch.attempts += 1
        batch.retry_at_ms = now_ms + backoff_ms
        with self._lock:
            queue = self._queues.setdefault(batch.tp, deque())
            index = 0
            while index < len(queue) and 0 <= queue[index].send_order < batch.send_order:
                index += 1
            queue.insert(index, batch)

    def put_back(self, batches: Iterable[ProducerBatch]) -> None:
        """Returns drained batches that were not sent to the head of their queues, in order."""
        with self._lock:
            for batch in reversed(list(batches)):
                self._queues.setdefault(batch.tp, deque()).appendleft(batch)

    def expire(self, now_ms: int, delivery_timeout_ms: int) -> list[ProducerBatch]:
        """Removes and returns queued batches older than `delivery_timeout_ms`."""
        expired: list[ProducerBatch] = []
        with self._lock:
            for queue in self._queues.values():
                while queue and queue[0].created_ms + delivery_timeout_ms <= now_ms:
                    expired.append(queue.popleft())
            self._close_batches(expired)
        return expired

    def deallocate(self, batch: ProducerBatch) -> None:
        """A batch is done (sent or failed): frees its buffer space."""
        with self._lock:
            if batch not in self._incomplete:
                return
            self._incomplete.discard(batch)
            self._count_delivery(batch)
            self._batches.used_bytes -= batch.builder.reserved_bytes
            assert self._batches.used_bytes >= 0, "buffer accounting went negative"
            self._space_freed.notify_all()
            self._all_done.notify_all()

    def _count_delivery(self, batch: ProducerBatch) -> None:
        """Holding the lock: a done batch's records count as delivered or failed."""
        assert batch.done, "a batch is deallocated once its futures are resolved"
        counts, records = self._delivery_counts, batch.builder.record_count()
        error = batch.result.error
        if error is None:
            self._delivery_counts = DeliveryCounts(
                counts.records_delivered + records, counts.records_failed, counts.last_error
            )
        else:
            self._delivery_counts = DeliveryCounts(
                counts.records_delivered, counts.records_failed + records, error
            )

    def delivery_counts(self) -> DeliveryCounts:
        with self._lock:
            return self._delivery_counts

    def flush(self, timeout_s: float | None) -> bool:
        """Makes every batch ready now and waits until all appended so far are done."""
        with self._lock:
            pending = list(self._incomplete)
            self._flushes_in_progress += 1
        self._wakeup.set()
        try:
            with self._lock:
                return self._all_done.wait_for(lambda: self._all_freed(pending), timeout_s)
        finally:
            with self._lock:
                self._flushes_in_progress -= 1

    def _all_freed(self, pending: list[ProducerBatch]) -> bool:
        """Holding the lock: whether every batch of `pending` was deallocated, dropping those
        that were from it. Each batch done wakes a flush, and a wake-up costs only the batches
        freed since the last one: testing every pending batch each time cost the flush 18 us of
        CPU a batch at 2,500 batches in flight (7 us now), as bench/client.py's defaults have."""
        while pending and pending[-1] not in self._incomplete:
            pending.pop()
        return not pending

    def close(self) -> None:
        """No more appends; every queued batch is ready at once."""
        with self._lock:
            self._batches.closing = True
        self._wakeup.set()

    def abort_all(self, error: BaseException) -> None:
        """Fails every queued batch (a forced close)."""
        with self._lock:
            batches = [b for q in self._queues.values() for b in q]
            for queue in self._queues.values():
                queue.clear()
            self._open.clear()
        for batch in batches:
            batch.fail(error)
            self.deallocate(batch)

    def has_pending(self) -> bool:
        with self._lock:
            return bool(self._incomplete)

    def used_bytes(self) -> int:
        with self._lock:
            return self._batches.used_bytes
