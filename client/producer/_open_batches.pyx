# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled twin of open_batches.py: the producer's per-record path, `SendPath.send` and
`OpenBatches.append`, with each open batch's buffer, record count, timestamps and byte counts in
C fields.

`SendPath.send` runs the common record with no Python frame: the partition count and the sticky
partition are single dict reads, a key's murmur2 is computed in C (`murmur2.pxi`) and the
compiled `OpenBatches` is called directly. Whatever is rare (a topic or partition not known yet, a
full sticky batch, a custom partitioner, a delivery callback) goes through the same Python calls
as the twin's.

A record is sized, checked and encoded straight into its batch's bytearray (the codec's own
encoder, `record_encoding.pxi`) under the accumulator's lock, with no Python frame per record
and no BatchBuilder until the batch is built: `build` hands the buffer to a BatchBuilder
(`adopt_records`), which writes the header. Whatever is not per record (waiting for buffer
space, queueing a new batch) calls back into accumulator.py, as the Python twin does.

A record's future is the same FutureRecordMetadata the twin makes, filled through its slots and
left out of the garbage collector's lists (`slots.pxi`): a caller typically keeps every future of
a run, and the collector walking hundreds of thousands of them again and again cost about 0.3 us
a record. No reference cycle outlives a batch through a future: the one way back to it, its
batch's callback list, is emptied when the batch's result is set, and closing the producer sets
every batch's result.
"""

from cpython.bytes cimport PyBytes_CheckExact
from cpython.dict cimport PyDict_GetItem
from cpython.ref cimport PyObject
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from pykraft.client.producer.future import BatchResult, FutureRecordMetadata
from pykraft.client.producer.open_batches import (
    NO_HEADERS,
    RECORD_OVERHEAD_BYTES,
    check_bytes,
    delivery_reporter,
    record_size_bytes,
    too_large,
)
from pykraft.client.producer.partitioner import DefaultPartitioner
from pykraft.client.types import TopicPartition
from pykraft.proto.record_batch.build import BatchBuilder
from pykraft.proto.record_batch.compression import compressed_size_bound
from pykraft.proto.record_batch.header import HEADER_SIZE, Compression

include "record_encoding.pxi"
include "slots.pxi"
include "murmur2.pxi"

cdef extern from *:
    bint sub_overflows "__builtin_sub_overflow" (int64_t a, int64_t b, int64_t* out) nogil

cdef Py_ssize_t _RECORD_OVERHEAD = RECORD_OVERHEAD_BYTES
cdef Py_ssize_t _HEADER_SIZE = HEADER_SIZE
cdef object _NONE = Compression.NONE
cdef Py_ssize_t[4] _FUTURE_SLOTS
slot_offsets(FutureRecordMetadata, ("_result", "_tp", "_index", "_timestamp_ms"), _FUTURE_SLOTS)


cdef inline Py_ssize_t _length(object data) except -1:
    """len(data) if data else 0, as the twin counts a key or value."""
    if data is None:
        return 0
    if PyBytes_Check(data):
        return PyBytes_GET_SIZE(data)
    return len(data)


cdef object _now_ms():
    """time.time_ns() // 1_000_000, without the call."""
    cdef timespec now
    clock_gettime(CLOCK_REALTIME, &now)
    return <int64_t>now.tv_sec * 1000 + now.tv_nsec // 1000000


cdef class OpenBatch:
    """open_batches.OpenBatch with its state in C fields."""

    cdef readonly object tp
    cdef readonly object result
    cdef readonly Py_ssize_t size_bytes
    cdef readonly Py_ssize_t reserved_bytes
    cdef bytearray _records
    cdef Py_ssize_t _count
    cdef int64_t _base_timestamp
    cdef int64_t _max_timestamp
    cdef object _compression
    cdef bint _uncompressed
    cdef object _builder  # the BatchBuilder that builds it, made at set_producer or build

    def __init__(self, tp, compression):
        self.tp = tp
        self.result = BatchResult()
        self._records = bytearray()
        self._compression = Compression(compression)
        self._uncompressed = self._compression is _NONE
        self.size_bytes = self._size_bound()

    cdef Py_ssize_t _size_bound(self) except -1:
        """BatchBuilder.estimated_size_bytes of these records."""
        cdef Py_ssize_t records = PyByteArray_GET_SIZE(self._records)
        if self._uncompressed:
            return _HEADER_SIZE + records
        return _HEADER_SIZE + compressed_size_bound(self._compression, records)

    cdef Py_ssize_t add(self, object timestamp_ms, key, value, headers, Py_ssize_t size) except -1:
        """`append`, for OpenBatches; raises before anything changes, as BatchBuilder.append."""
        assert self._builder is None, "a built batch takes no more records"
        cdef int64_t timestamp, delta = 0
        try:
            timestamp = timestamp_ms
        except OverflowError:
            raise ValueError(f"timestamp {timestamp_ms} out of range for this batch") from None
        if self._count and sub_overflows(timestamp, self._base_timestamp, &delta):
            raise ValueError(f"timestamp {timestamp_ms} out of range for this batch")
        encode_into(self._records, delta, self._count, key, value, headers)
        if self._count == 0:
            self._base_timestamp = self._max_timestamp = timestamp
        elif timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._count += 1
        self.size_bytes = self._size_bound()
        self.reserved_bytes += size
        return self._count - 1

    def append(self, timestamp_ms, key, value, headers, Py_ssize_t size):
        """open_batches.OpenBatch.append."""
        return self.add(timestamp_ms, key, value, headers, size)

    def record_count(self):
        return self._count

    cdef object _built_by(self):
        if self._builder is None:
            self._builder = BatchBuilder(compression=self._compression)
            self._builder.adopt_records(
                self._records, self._count, self._base_timestamp, self._max_timestamp
            )
        return self._builder

    def set_producer(self, producer_id, producer_epoch, base_sequence):
        """open_batches.OpenBatch.set_producer."""
        self._built_by().set_producer(producer_id, producer_epoch, base_sequence)

    def build(self):
        """open_batches.OpenBatch.build."""
        return self._built_by().build()


cdef object _future(object result, object tp, Py_ssize_t index, object timestamp_ms):
    """FutureRecordMetadata(result, tp, index, timestamp_ms), untracked by the collector."""
    future = new_instance(FutureRecordMetadata)
    set_slot(future, _FUTURE_SLOTS[0], result)
    set_slot(future, _FUTURE_SLOTS[1], tp)
    set_slot(future, _FUTURE_SLOTS[2], index)
    set_slot(future, _FUTURE_SLOTS[3], timestamp_ms)
    untrack(future)
    return future


cdef class OpenBatches:
    """open_batches.OpenBatches with its byte counts and limits in C fields."""

    cdef dict _open
    cdef object _acquire
    cdef object _release
    cdef Py_ssize_t _batch_size
    cdef Py_ssize_t _buffer_memory
    cdef Py_ssize_t _max_request_size
    cdef object _compression
    cdef object _wake
    cdef object _wait_for_space
    cdef object _register
    cdef public long long used_bytes
    cdef public bint closing

    def __init__(
        self,
        dict open_batches,
        lock,
        *,
        Py_ssize_t batch_size,
        Py_ssize_t buffer_memory,
        Py_ssize_t max_request_size,
        compression,
        wakeup,
        wait_for_space,
        register,
    ):
        self._open = open_batches
        self._acquire = lock.acquire
        self._release = lock.release
        self._batch_size = batch_size
        self._buffer_memory = buffer_memory
        self._max_request_size = max_request_size
        self._compression = compression
        self._wake = wakeup.set
        self._wait_for_space = wait_for_space
        self._register = register
        self.used_bytes = 0
        self.closing = False

    def append(
        self, tp, timestamp_ms, key, value, headers, max_block_ms, bint abort_on_new_batch=False
    ):
        """open_batches.OpenBatches.append."""
        return self.add(tp, timestamp_ms, key, value, headers, max_block_ms, abort_on_new_batch)

    cdef object add(
        self, tp, timestamp_ms, key, value, headers, max_block_ms, bint abort_on_new_batch
    ):
        """`append`, for SendPath."""
        if timestamp_ms is None:
            timestamp_ms = _now_ms()
        cdef Py_ssize_t size = _RECORD_OVERHEAD + _length(key) + _length(value)
        if headers:
            size = record_size_bytes(key, value, headers)
        if size > self._max_request_size or size > self._buffer_memory:
            raise too_large(size, self._max_request_size, self._buffer_memory)
        cdef OpenBatch batch
        cdef PyObject* found
        cdef Py_ssize_t index
        cdef bint wake = False
        self._acquire()
        try:
            if self.used_bytes + size > self._buffer_memory or self.closing:
                self._wait_for_space(size, max_block_ms)
            found = PyDict_GetItem(self._open, tp)
            if found is not NULL and (<OpenBatch>found).size_bytes + size <= self._batch_size:
                batch = <OpenBatch>found
                index = batch.add(timestamp_ms, key, value, headers, size)
            elif abort_on_new_batch:
                return None
            else:
                # Encoded before it is registered: a refused record leaves no trace.
                batch = OpenBatch(tp, self._compression)
                index = batch.add(timestamp_ms, key, value, headers, size)
                self._register(batch)
                # The sender sleeps until the lingers it knows of end (Kafka's newBatchCreated).
                wake = True
            self.used_bytes += size
            wake = wake or batch.size_bytes >= self._batch_size
        finally:
            self._release()
        if wake:
            self._wake()
        return _future(batch.result, tp, index, timestamp_ms)


cdef class SendPath:
    """open_batches.SendPath, with the common record's work in C."""

    cdef public bint closed
    cdef object _metadata
    cdef dict _known_partition_counts
    cdef object _partitioner
    cdef dict _sticky  # the default partitioner's sticky partitions; None for another partitioner
    cdef OpenBatches _batches  # None when the batches are the Python twin's
    cdef object _append
    cdef object _max_block_ms
    cdef object _wait_for_partition
    cdef dict _topic_partitions

    def __init__(self, metadata, partitioner, batches, *, max_block_ms, wait_for_partition):
        self._metadata = metadata
        self._known_partition_counts = metadata.known_partition_counts
        self._partitioner = partitioner
        self._sticky = partitioner.sticky if type(partitioner) is DefaultPartitioner else None
        self._batches = batches if type(batches) is OpenBatches else None
        self._append = batches.append
        self._max_block_ms = max_block_ms
        self._wait_for_partition = wait_for_partition
        self._topic_partitions = {}
        self.closed = False

    def send(
        self,
        topic,
        value=None,
        key=None,
        partition=None,
        headers=None,
        timestamp_ms=None,
        on_delivery=None,
    ):
        """open_batches.SendPath.send."""
        if self.closed:
            raise RuntimeError("the producer is closed")
        if (key is not None and not PyBytes_CheckExact(key)) or (
            value is not None and not PyBytes_CheckExact(value)
        ):
            check_bytes(key=key, value=value)
        record_headers = list(headers) if headers else NO_HEADERS
        cdef PyObject* known = PyDict_GetItem(self._known_partition_counts, topic)
        if known is not NULL:
            count = <object>known
        else:
            count = self._metadata.wait_for_topic(topic, self._max_block_ms)
        if partition is not None and not 0 <= partition < count:
            count = self._wait_for_partition(topic, partition, count)
        tps = self._partitions_of(topic, count)
        cdef bint sticky = partition is None and key is None
        if partition is None:
            partition = self._choose(topic, key, count)
        future = self._add(tps[partition], timestamp_ms, key, value, record_headers, sticky)
        if future is None:  # the sticky partition's batch is full: move on, as Kafka does
            future = self._append_elsewhere(tps, partition, timestamp_ms, value, record_headers)
        if on_delivery is not None:
            future.add_done_callback(delivery_reporter(on_delivery))
        return future

    cdef tuple _partitions_of(self, topic, count):
        """The topic's partitions, built again only when the count changed."""
        cdef PyObject* found = PyDict_GetItem(self._topic_partitions, topic)
        if found is not NULL and len(<tuple>found) == count:
            return <tuple>found
        tps = tuple([TopicPartition(topic, p) for p in range(count)])
        self._topic_partitions[topic] = tps
        return tps

    cdef object _choose(self, topic, key, count):
        """partitioner.partition(topic, key, count), the default partitioner's in C."""
        cdef PyObject* current
        if self._sticky is None or count <= 0:
            return self._partitioner.partition(topic, key, count)
        if key is not None:  # to_positive(murmur2(key)) % count
            hashed = murmur2_of(<const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
            return (<Py_ssize_t>(<uint32_t>hashed & 0x7FFFFFFF)) % <Py_ssize_t>count
        current = PyDict_GetItem(self._sticky, topic)
        if current is not NULL and <object>current < count:
            return <object>current
        return self._partitioner.partition(topic, None, count)

    cdef object _add(self, tp, timestamp_ms, key, value, headers, bint sticky):
        if self._batches is not None:
            return self._batches.add(
                tp, timestamp_ms, key, value, headers, self._max_block_ms, sticky
            )
        return self._append(tp, timestamp_ms, key, value, headers, self._max_block_ms, sticky)

    cdef object _append_elsewhere(self, tuple tps, full, timestamp_ms, value, headers):
        """open_batches.SendPath._append_elsewhere."""
        topic, count = tps[0].topic, len(tps)
        self._partitioner.on_new_batch(topic, full, count)
        chosen = self._partitioner.partition(topic, None, count)
        future = self._add(tps[chosen], timestamp_ms, None, value, headers, False)
        assert future is not None
        return future
