"""Per-partition queues of record batches, bounded by `buffer_memory`, drained by the sender.

Producer threads `append`; the sender thread asks which partitions are `ready` (a batch is full,
its linger expired, or a flush or close is under way), `drain`s one batch per partition, and
`deallocate`s each batch once it is done, which frees its share of the buffer. All times are
passed in as `now_ms` (monotonic milliseconds).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from pykraft.client.clock import monotonic_ms
from pykraft.client.errors import MessageTooLargeError, RequestTimedOutError
from pykraft.client.producer.future import BatchResult, FutureRecordMetadata
from pykraft.client.types import TopicPartition
from pykraft.proto import extensions
from pykraft.proto.record_batch import NO_PRODUCER_ID, BatchBuilder, Compression

# A record's future: compiled, untracked by the garbage collector, unless disabled or not
# built (pykraft.proto.extensions); the class itself otherwise.
record_future: Callable[[BatchResult, TopicPartition, int, int], FutureRecordMetadata]
record_future = FutureRecordMetadata
_compiled = extensions.load("pykraft.client.producer._record_future")
if _compiled is not None:
    record_future = _compiled.record_future

# A record's bytes in the batch beyond key, value and headers (length, attributes, deltas).
RECORD_OVERHEAD_BYTES = 21
Headers = Sequence[tuple[str, bytes | None]]


class BufferExhaustedError(RequestTimedOutError):
    """`send` waited `max_block_ms` for buffer space that never came (Kafka's
    BufferExhaustedException, a TimeoutException): the cluster is slower than the producer."""


def record_size_bytes(key: bytes | None, value: bytes | None, headers: Headers) -> int:
    """An upper bound on the record's encoded size; the buffer reserves this much for it."""
    size = RECORD_OVERHEAD_BYTES + (len(key) if key else 0) + (len(value) if value else 0)
    if headers:
        size += sum(len(k.encode()) + len(v or b"") + 10 for k, v in headers)
    return size


@dataclass(eq=False)
class ProducerBatch:
    """One batch under construction or in flight; its records' futures share `result`."""

    tp: TopicPartition
    builder: BatchBuilder
    created_ms: int
    reserved_bytes: int = 0
    # The builder's estimated_size_bytes() after the last append, kept so `append` need not
    # ask the builder again per record.
    size_estimate: int = 0
    attempts: int = 0
    retry_at_ms: int = 0
    result: BatchResult = field(default_factory=BatchResult)
    # The batch's bytes, built once at its first send and sent unchanged by every retry (an
    # idempotent producer's retry must carry the same sequence), and the producer id in them.
    records: bytes | None = None
    producer_id: int = NO_PRODUCER_ID
    # Numbered at the batch's first send (`in_flight.InFlightBatches`); -1 until then. Retries
    # wait in their queue in this order.
    send_order: int = -1

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
        self._max_request_size = max_request_size
        self._batch_size = batch_size
        self._linger_ms = linger_ms
        self._buffer_memory = buffer_memory
        self._compression = compression
        self._wakeup = wakeup
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        # Per partition, the last queued batch while it was never drained: the one appends go to.
        self._open: dict[TopicPartition, ProducerBatch] = {}
        self._used_bytes = 0
        self._incomplete: set[ProducerBatch] = set()
        self._flushes_in_progress = 0
        self._delivery_counts = DeliveryCounts(0, 0, None)
        self._closing = False
        self._lock = threading.Lock()
        self._space_freed = threading.Condition(self._lock)
        self._all_done = threading.Condition(self._lock)

    def append(
        self,
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
        max_block_ms: int,
        abort_on_new_batch: bool = False,
    ) -> FutureRecordMetadata | None:
        """Adds one record and returns its future; None (nothing added) when
        `abort_on_new_batch` is set and the record would open a new batch, so the caller may
        choose another partition first. Blocks up to `max_block_ms` for buffer space, then
        raises BufferExhaustedError."""
        # record_size_bytes, inlined for the common record without headers: this runs per record.
        size = RECORD_OVERHEAD_BYTES + (len(key) if key else 0) + (len(value) if value else 0)
        if headers:
            size = record_size_bytes(key, value, headers)
        if size > self._max_request_size or size > self._buffer_memory:
            raise MessageTooLargeError(
                f"a record of about {size} bytes is larger than max_request_size "
                f"({self._max_request_size}) or buffer_memory ({self._buffer_memory}): "
                "raise them, or send smaller records"
            )
        with self._lock:
            if self._used_bytes + size > self._buffer_memory or self._closing:
                self._wait_for_space(size, max_block_ms)
            batch = self._open.get(tp)
            if batch is not None and batch.size_estimate + size <= self._batch_size:
                builder = batch.builder
                index = builder.record_count()
                builder.append(timestamp_ms, key, value, headers)
                wake = False
            elif abort_on_new_batch:
                return None
            else:
                # Encoded before anything is registered: a record the builder refuses leaves
                # no trace.
                builder, index = BatchBuilder(compression=self._compression), 0
                builder.append(timestamp_ms, key, value, headers)
                batch = self._register(tp, builder)
                # The sender sleeps until the lingers it knows of end (Kafka's newBatchCreated).
                wake = True
            batch.size_estimate = estimate = builder.estimated_size_bytes()
            batch.reserved_bytes += size
            self._used_bytes += size
        if wake or estimate >= self._batch_size:
            self._wakeup.set()
        return record_future(batch.result, tp, index, timestamp_ms)

    def _register(self, tp: TopicPartition, builder: BatchBuilder) -> ProducerBatch:
        """Holding the lock: queues a new open batch for `tp` around `builder`."""
        batch = ProducerBatch(tp, builder, created_ms=monotonic_ms())
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        queue.append(batch)
        self._open[tp] = batch
        self._incomplete.add(batch)
        return batch

    def _wait_for_space(self, size: int, max_block_ms: int) -> None:
        """Holding the lock: waits up to `max_block_ms` until `size` bytes of buffer are free;
        BufferExhaustedError after that, RuntimeError if the producer closes meanwhile."""
        deadline = time.monotonic() + max_block_ms / 1000
        while self._used_bytes + size > self._buffer_memory and not self._closing:
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                raise BufferExhaustedError(
                    f"waited {max_block_ms} ms for {size} bytes of buffer_memory "
                    f"({self._buffer_memory} bytes, all in use): the cluster is not "
                    "keeping up; raise buffer_memory or max_block_ms, or send slower"
                )
            self._space_freed.wait(remaining_s)
        if self._closing:
            raise RuntimeError("the producer is closed")

    def ready(self, now_ms: int) -> tuple[list[TopicPartition], int]:
        """Partitions with a batch to send now, and how long until the next may be (ms)."""
        ready: list[TopicPartition] = []
        next_ms = self._linger_ms if self._linger_ms > 0 else 100
        with self._lock:
            hurry = self._flushes_in_progress > 0 or self._closing
            for tp, queue in self._queues.items():
                if not queue:
                    continue
                first = queue[0]
                if first.retry_at_ms > now_ms:
                    next_ms = min(next_ms, first.retry_at_ms - now_ms)
                    continue
                full = len(queue) > 1 or first.size_estimate >= self._batch_size
                wait_ms = first.created_ms + self._linger_ms - now_ms
                if full or hurry or first.attempts > 0 or wait_ms <= 0:
                    ready.append(tp)
                else:
                    next_ms = min(next_ms, wait_ms)
        return ready, max(next_ms, 1)

    def drain(
        self, tps: Iterable[TopicPartition], may_send: Callable[[ProducerBatch], bool]
    ) -> list[ProducerBatch]:
        """Takes the first batch of each partition, in the order given, where `may_send`
        allows it; a drained batch takes no more records."""
        with self._lock:
            drained: list[ProducerBatch] = []
            for tp in tps:
                queue = self._queues.get(tp)
                if queue and may_send(queue[0]):
                    drained.append(queue.popleft())
            self._close_batches(drained)
            return drained

    def _close_batches(self, batches: Iterable[ProducerBatch]) -> None:
        """Holding the lock: batches leaving their queues take no more records."""
        for batch in batches:
            if self._open.get(batch.tp) is batch:
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
            self._used_bytes -= batch.reserved_bytes
            assert self._used_bytes >= 0, "buffer accounting went negative"
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
            pending = set(self._incomplete)
            self._flushes_in_progress += 1
        self._wakeup.set()
        try:
            with self._lock:
                return self._all_done.wait_for(lambda: not (pending & self._incomplete), timeout_s)
        finally:
            with self._lock:
                self._flushes_in_progress -= 1

    def close(self) -> None:
        """No more appends; every queued batch is ready at once."""
        with self._lock:
            self._closing = True
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
            return self._used_bytes
