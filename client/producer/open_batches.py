"""The producer's per-record path: `Producer.send`'s work (`SendPath`), the batches taking
records, one per partition, and the buffer's byte count, which every `send` reads and changes.

`SendPath.send` checks the record, reads the topic's partition count, chooses the partition
(murmur2 of the key, or the topic's sticky one) and appends; anything rare (a topic or partition
not known yet, a sticky batch that is full, a delivery callback) calls back into the metadata,
the partitioner and the producer. `OpenBatches.append` sizes the record, takes the
accumulator's lock, finds the partition's open batch, encodes the record into it, counts its
bytes and hands back the record's future. The rest stays in accumulator.py, which `append`
calls back, still holding the lock, only to wait for buffer space and to queue a new batch.

This module is the pure-Python twin of the compiled `_open_batches.pyx`, whose classes
`producer.SendPath` and `accumulator.OpenBatches` are unless PYKRAFT_NO_EXTENSIONS is set or it
was not built (pykraft.proto.extensions). The compiled `SendPath` runs `send` with no Python
frame for the common record (the partition count and the sticky partition read from their
dicts, the key's murmur2 in C, the compiled append called directly); the compiled
`OpenBatches` keeps each open batch's buffer, counts and timestamps in C fields, encodes
straight into the buffer and leaves its futures out of the garbage collector's lists. Both give
the same batches byte for byte, the same futures and the same errors
(tests/unit/client/test_open_batches_extension.py, test_send_path_extension.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pykraft.client.errors import MessageTooLargeError
from pykraft.client.producer.future import BatchResult, FutureRecordMetadata, RecordCallback
from pykraft.client.types import RecordMetadata, TopicPartition
from pykraft.proto.record_batch import BatchBuilder, Compression

if TYPE_CHECKING:
    from pykraft.client.cluster_metadata import ClusterMetadata
    from pykraft.client.producer.partitioner import DefaultPartitioner

# A record's bytes in the batch beyond key, value and headers (length, attributes, deltas).
RECORD_OVERHEAD_BYTES = 21
Headers = Sequence[tuple[str, bytes | None]]
DeliveryCallback = Callable[[RecordMetadata | None, BaseException | None], None]
NO_HEADERS: Headers = ()


def record_size_bytes(key: bytes | None, value: bytes | None, headers: Headers) -> int:
    """An upper bound on the record's encoded size; the buffer reserves this much for it."""
    size = RECORD_OVERHEAD_BYTES + (len(key) if key else 0) + (len(value) if value else 0)
    if headers:
        size += sum(len(k.encode()) + len(v or b"") + 10 for k, v in headers)
    return size


def too_large(size: int, max_request_size: int, buffer_memory: int) -> MessageTooLargeError:
    """The error for a record no batch and no buffer could ever hold."""
    return MessageTooLargeError(
        f"a record of about {size} bytes is larger than max_request_size "
        f"({max_request_size}) or buffer_memory ({buffer_memory}): "
        "raise them, or send smaller records"
    )


class OpenBatch:
    """One producer batch's records: encoded as they are appended, built once at its first send.
    Its records' futures share `result`; `size_bytes` bounds the batch's built size and
    `reserved_bytes` is the buffer space its records hold."""

    __slots__ = ("_builder", "reserved_bytes", "result", "size_bytes", "tp")

    def __init__(self, tp: TopicPartition, compression: Compression) -> None:
        self.tp = tp
        self.result = BatchResult()
        self._builder = BatchBuilder(compression=compression)
        self.size_bytes = self._builder.estimated_size_bytes()
        self.reserved_bytes = 0

    def append(
        self, timestamp_ms: int, key: bytes | None, value: bytes | None, headers: Headers, size: int
    ) -> int:
        """Encodes one record that holds `size` bytes of the buffer; its index in the batch.
        A record the builder refuses (ValueError, BatchError) leaves no trace."""
        builder = self._builder
        index = builder.record_count()
        builder.append(timestamp_ms, key, value, headers)
        self.size_bytes = builder.estimated_size_bytes()
        self.reserved_bytes += size
        return index

    def record_count(self) -> int:
        return self._builder.record_count()

    def set_producer(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """BatchBuilder.set_producer: the idempotent producer's stamp, known at the first send."""
        self._builder.set_producer(producer_id, producer_epoch, base_sequence)

    def build(self) -> bytes:
        """The batch's bytes; after this the batch takes no more records."""
        return self._builder.build()


class OpenBatches:
    """The open batch of each partition (`open_batches`, shared with the accumulator, which
    changes it under `lock`) and the buffer bytes that queued records hold (`used_bytes`)."""

    def __init__(
        self,
        open_batches: dict[TopicPartition, OpenBatch],
        lock: threading.Lock,
        *,
        batch_size: int,
        buffer_memory: int,
        max_request_size: int,
        compression: Compression,
        wakeup: threading.Event,
        wait_for_space: Callable[[int, int], None],
        register: Callable[[OpenBatch], None],
    ) -> None:
        """`wait_for_space(size, max_block_ms)` blocks (holding `lock`, through a condition on
        it) until `size` bytes are free, or raises; `register(batch)` queues a new batch."""
        self._open = open_batches
        self._lock = lock
        self._batch_size = batch_size
        self._buffer_memory = buffer_memory
        self._max_request_size = max_request_size
        self._compression = compression
        self._wakeup = wakeup
        self._wait_for_space = wait_for_space
        self._register = register
        self.used_bytes = 0
        self.closing = False

    def append(
        self,
        tp: TopicPartition,
        timestamp_ms: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
        max_block_ms: int,
        abort_on_new_batch: bool = False,
    ) -> FutureRecordMetadata | None:
        """Adds one record and returns its future; None (nothing added) when
        `abort_on_new_batch` is set and the record would open a new batch, so the caller may
        choose another partition first. A record without `timestamp_ms` is stamped now (wall
        clock, ms), before any wait. Blocks up to `max_block_ms` for buffer space, then
        raises BufferExhaustedError; MessageTooLargeError for a record that can never fit."""
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        # record_size_bytes, inlined for the common record without headers.
        size = RECORD_OVERHEAD_BYTES + (len(key) if key else 0) + (len(value) if value else 0)
        if headers:
            size = record_size_bytes(key, value, headers)
        if size > self._max_request_size or size > self._buffer_memory:
            raise too_large(size, self._max_request_size, self._buffer_memory)
        with self._lock:
            if self.used_bytes + size > self._buffer_memory or self.closing:
                self._wait_for_space(size, max_block_ms)
            batch = self._open.get(tp)
            if batch is not None and batch.size_bytes + size <= self._batch_size:
                index = batch.append(timestamp_ms, key, value, headers, size)
                wake = False
            elif abort_on_new_batch:
                return None
            else:
                # Encoded before it is registered: a refused record leaves no trace.
                batch = OpenBatch(tp, self._compression)
                index = batch.append(timestamp_ms, key, value, headers, size)
                self._register(batch)
                # The sender sleeps until the lingers it knows of end (Kafka's newBatchCreated).
                wake = True
            self.used_bytes += size
            wake = wake or batch.size_bytes >= self._batch_size
        if wake:
            self._wakeup.set()
        return FutureRecordMetadata(batch.result, tp, index, timestamp_ms)


def check_bytes(**fields: object) -> None:
    """TypeError naming the first field that is neither bytes nor None."""
    for name, data in fields.items():
        if data is not None and not isinstance(data, bytes):
            raise TypeError(f"{name} must be bytes or None, not {type(data).__name__}")


def delivery_reporter(on_delivery: DeliveryCallback) -> RecordCallback:
    """The future's callback that hands `on_delivery` the record's metadata or its error."""

    def report(done: FutureRecordMetadata) -> None:
        error = done.exception()
        on_delivery(None if error else done.result(), error)

    return report


class SendPath:
    """`Producer.send` for one producer: reads the topic's partition count from `metadata`
    (waiting up to `max_block_ms` for a topic it does not know, and through
    `wait_for_partition(topic, partition, count)` for a partition beyond the count), chooses the
    partition with `partitioner` and appends to `batches`. `closed` refuses every send after."""

    def __init__(
        self,
        metadata: ClusterMetadata,
        partitioner: DefaultPartitioner,
        batches: OpenBatches,
        *,
        max_block_ms: int,
        wait_for_partition: Callable[[str, int, int], int],
    ) -> None:
        self._metadata = metadata
        self._known_partition_counts = metadata.known_partition_counts
        self._partitioner = partitioner
        self._append = batches.append
        self._max_block_ms = max_block_ms
        self._wait_for_partition = wait_for_partition
        # Each topic's partitions, reused so no TopicPartition is built per record.
        self._topic_partitions: dict[str, tuple[TopicPartition, ...]] = {}
        self.closed = False

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp_ms: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> FutureRecordMetadata:
        """Queues one record; the future resolves to where it landed, or to its KafkaError.

        Blocks up to `max_block_ms` for the topic's metadata (a partition beyond the count the
        producer knows included) and for buffer space. Raises ValueError for a partition the
        topic does not have after that; `on_delivery(metadata, error)` runs on the sender
        thread once the record is delivered or has failed.
        """
        if self.closed:
            raise RuntimeError("the producer is closed")
        if (key is not None and type(key) is not bytes) or (
            value is not None and type(value) is not bytes
        ):
            check_bytes(key=key, value=value)
        record_headers = list(headers) if headers else NO_HEADERS
        count = self._known_partition_counts.get(topic)
        if count is None:
            count = self._metadata.wait_for_topic(topic, self._max_block_ms)
        if partition is not None and not 0 <= partition < count:
            count = self._wait_for_partition(topic, partition, count)
        tps = self._topic_partitions.get(topic)
        if tps is None or len(tps) != count:  # first use, or partitions were added
            tps = self._topic_partitions[topic] = tuple(
                TopicPartition(topic, p) for p in range(count)
            )
        sticky = partition is None and key is None
        if partition is None:
            partition = self._partitioner.partition(topic, key, count)
        # Without timestamp_ms the record is stamped now, as Kafka does after the metadata wait.
        future = self._append(
            tps[partition], timestamp_ms, key, value, record_headers, self._max_block_ms, sticky
        )
        if future is None:  # the sticky partition's batch is full: move on, as Kafka does
            future = self._append_elsewhere(tps, partition, timestamp_ms, value, record_headers)
        if on_delivery is not None:
            future.add_done_callback(delivery_reporter(on_delivery))
        return future

    def _append_elsewhere(
        self,
        tps: tuple[TopicPartition, ...],
        full: int,
        timestamp_ms: int | None,
        value: bytes | None,
        headers: Headers,
    ) -> FutureRecordMetadata:
        """Appends a keyless record after the sticky partition `full` of `tps` (the topic's
        partitions) would have needed a new batch: the partitioner moves on first, so a new
        batch starts elsewhere."""
        topic, count = tps[0].topic, len(tps)
        self._partitioner.on_new_batch(topic, full, count)
        chosen = self._partitioner.partition(topic, None, count)
        future = self._append(tps[chosen], timestamp_ms, None, value, headers, self._max_block_ms)
        assert future is not None
        return future
