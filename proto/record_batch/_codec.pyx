# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled record codec: `encode_record` and `decode_records`, the per-record loops of
`build.py` and `decode.py`, byte for byte and record for record (tests/unit/proto/
test_record_batch_extension.py proves it on random inputs).

`codec_impl.py` chooses between this module and the pure-Python one; nothing else imports it.
Records are filled through their slots' offsets (`slots.pxi`), as a frozen dataclass cannot be
set through attributes and its __init__ costs more than the decoding itself.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint64_t, uint8_t

from pykraft.proto.record_batch.header import BatchError
from pykraft.proto.record_batch.records import Record, RecordHeader

include "slots.pxi"

cdef int64_t _INT64_MAX = 0x7FFFFFFFFFFFFFFF
cdef int64_t _INT64_MIN = -_INT64_MAX - 1
cdef Py_ssize_t[5] _RECORD_SLOTS
slot_offsets(Record, ("offset", "timestamp", "key", "value", "headers"), _RECORD_SLOTS)


# ---------------------------------------------------------------------------------- encoding

include "record_encoding.pxi"


def encode_record(
    bytearray records,
    int64_t timestamp_delta,
    int64_t offset_delta,
    key,
    value,
    headers,
):
    """Appends one record (its Length varint first) to `records`, as build.encode_record."""
    encode_into(records, timestamp_delta, offset_delta, key, value, headers)


# ---------------------------------------------------------------------------------- decoding

cdef class _Reader:
    """A cursor over the decompressed records; every read checks the bounds, and running past
    the end raises the same BatchError the pure decoder raises then."""

    cdef const uint8_t* data
    cdef Py_ssize_t size
    cdef Py_ssize_t pos
    cdef int64_t declared

    cdef int end_early(self) except -1:
        raise BatchError(f"records end early: {self.declared} declared")

    cdef inline int64_t varint(self, int bits) except? -1:
        """The zig-zag varint at the cursor: at most 5 bytes for 32 bits, 10 for 64."""
        cdef Py_ssize_t start = self.pos
        cdef Py_ssize_t limit = (bits + 6) // 7
        cdef uint64_t raw = 0
        cdef int shift = 0
        cdef uint8_t byte
        cdef Py_ssize_t index
        for index in range(limit):
            if self.pos >= self.size:
                self.end_early()
            byte = self.data[self.pos]
            self.pos += 1
            raw |= <uint64_t>(byte & 0x7F) << shift
            if byte < 0x80:
                if (byte & 0x7F) >> min(bits - shift, 7):
                    raise BatchError(f"varint at {start} overflows {bits} bits")
                return <int64_t>(raw >> 1) ^ -<int64_t>(raw & 1)
            shift += 7
        raise BatchError(f"varint at {start} is longer than {limit} bytes")

    cdef inline object take(self, Py_ssize_t size):
        if size > self.size - self.pos:
            self.end_early()
        cdef object out = PyBytes_FromStringAndSize(<const char*>self.data + self.pos, size)
        self.pos += size
        return out

    cdef inline object nullable_bytes(self):
        cdef int64_t size = self.varint(32)
        if size < 0:
            if size != -1:
                raise BatchError(f"negative length {size}")
            return None
        return self.take(size)

    cdef tuple headers(self):
        cdef int64_t count = self.varint(32)
        if not 0 <= count <= self.size - self.pos:
            raise BatchError(f"invalid header count {count}")
        cdef list out = []
        cdef int64_t key_size
        for _ in range(count):
            key_size = self.varint(32)
            if key_size < 0:
                raise BatchError("a record header key may not be null")
            try:
                key = self.take(key_size).decode()
            except UnicodeDecodeError:
                raise BatchError("a record header key is not utf-8") from None
            out.append(RecordHeader(key, self.nullable_bytes()))
        return tuple(out)


cdef inline object _add(int64_t base, int64_t delta):
    """base + delta as a Python int; past int64 as the pure decoder computes it."""
    if (delta > 0 and base > _INT64_MAX - delta) or (delta < 0 and base < _INT64_MIN - delta):
        return <object>base + <object>delta
    return base + delta


def decode_records(
    bytes data,
    int64_t base_offset,
    int64_t base_timestamp,
    int64_t log_append_ms,
    bint create_time,
    int64_t last_delta,
    int64_t record_count,
):
    """The records of a batch whose decompressed records are `data`, as
    decode.decode_records_python returns them (the same records, the same BatchErrors)."""
    cdef _Reader reader = _Reader()
    reader.data = <const uint8_t*>PyBytes_AS_STRING(data)
    reader.size = PyBytes_GET_SIZE(data)
    reader.pos = 0
    reader.declared = record_count
    cdef list records = []
    cdef int64_t previous_delta = -1
    cdef int64_t length, timestamp_delta, offset_delta
    cdef Py_ssize_t record_end
    for _ in range(record_count):
        length = reader.varint(32)
        record_end = reader.pos + length
        if reader.pos >= reader.size:
            reader.end_early()
        reader.pos += 1  # the unused record attributes
        timestamp_delta = reader.varint(64)
        offset_delta = reader.varint(32)
        if not previous_delta < offset_delta <= last_delta:
            raise BatchError(f"offset delta {offset_delta} after {previous_delta}")
        previous_delta = offset_delta
        key = reader.nullable_bytes()
        value = reader.nullable_bytes()
        if reader.pos >= reader.size:
            reader.end_early()
        if reader.data[reader.pos] == 0:  # HeadersCount: none, the common case
            headers = ()
            reader.pos += 1
        else:
            headers = reader.headers()
        if reader.pos != record_end:
            raise BatchError(f"record ends at {reader.pos}, its length says {record_end}")
        record = new_instance(Record)
        set_slot(record, _RECORD_SLOTS[0], _add(base_offset, offset_delta))
        set_slot(
            record,
            _RECORD_SLOTS[1],
            _add(base_timestamp, timestamp_delta) if create_time else log_append_ms,
        )
        set_slot(record, _RECORD_SLOTS[2], key)
        set_slot(record, _RECORD_SLOTS[3], value)
        set_slot(record, _RECORD_SLOTS[4], headers)
        untrack(record)
        records.append(record)
    if reader.pos != reader.size:
        raise BatchError(
            f"{reader.size - reader.pos} bytes follow the last of {len(records)} records"
        )
    return records
