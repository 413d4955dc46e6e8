# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled record codec: `encode_record` and `decode_records`, the per-record loops of
`build.py` and `decode.py`, byte for byte and record for record (tests/unit/proto/
test_record_batch_extension.py proves it on random inputs).

`codec_impl.py` chooses between this module and the pure-Python one; nothing else imports it.
Records are filled through their slots' offsets (`slots.pxi`), as a frozen dataclass cannot be
set through attributes and its __init__ costs more than the decoding itself.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint64_t, uint8_t
from libc.string cimport memcpy

from pykraft.proto.record_batch.header import BatchError
from pykraft.proto.record_batch.records import Record, RecordHeader

include "slots.pxi"

cdef int64_t _INT64_MAX = 0x7FFFFFFFFFFFFFFF
cdef int64_t _INT64_MIN = -_INT64_MAX - 1
cdef Py_ssize_t[5] _RECORD_SLOTS
slot_offsets(Record, ("offset", "timestamp", "key", "value", "headers"), _RECORD_SLOTS)


# ---------------------------------------------------------------------------------- encoding

cdef inline Py_ssize_t _varint_size(uint64_t raw) noexcept nogil:
    cdef Py_ssize_t size = 1
    while raw > 0x7F:
        raw >>= 7
        size += 1
    return size


cdef inline uint64_t _zigzag(int64_t value) noexcept nogil:
    return (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)


cdef inline char* _put_varint(char* out, uint64_t raw) noexcept nogil:
    while raw > 0x7F:
        out[0] = <char>((raw & 0x7F) | 0x80)
        out += 1
        raw >>= 7
    out[0] = <char>raw
    return out + 1


cdef inline char* _put_bytes(char* out, object data, Py_ssize_t size) noexcept:
    """The length varint (-1 for None) and the bytes of `data`, a bytes object or None."""
    if data is None:
        return _put_varint(out, 1)
    out = _put_varint(out, _zigzag(size))
    memcpy(out, PyBytes_AS_STRING(data), size)
    return out + size


cdef inline object _as_bytes(object data):
    if data is None or PyBytes_Check(data):
        return data
    return bytes(data)


cdef inline Py_ssize_t _field_size(object data):
    """Bytes of a length-prefixed field holding `data`, a bytes object or None."""
    if data is None:
        return 1
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
    return _varint_size(_zigzag(size)) + size


cdef bytes _encode_headers(object headers):
    """HeadersCount and the headers, as build._encode_headers writes them."""
    cdef list pairs = []
    cdef Py_ssize_t total = _varint_size(_zigzag(len(headers)))
    for header in headers:
        if isinstance(header, RecordHeader):
            key, value = header.key, header.value
        else:
            key, value = header
        if key is None:
            raise BatchError("a record header key may not be null")
        key = key.encode()
        value = _as_bytes(value)
        total += _field_size(key) + _field_size(value)
        pairs.append((key, value))
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef char* cursor = _put_varint(PyBytes_AS_STRING(out), _zigzag(len(pairs)))
    for key, value in pairs:
        cursor = _put_bytes(cursor, key, PyBytes_GET_SIZE(key))
        cursor = _put_bytes(cursor, value, 0 if value is None else PyBytes_GET_SIZE(value))
    return out


def encode_record(
    bytearray records,
    int64_t timestamp_delta,
    int64_t offset_delta,
    key,
    value,
    headers,
):
    """Appends one record (its Length varint first) to `records`, as build.encode_record."""
    key = _as_bytes(key)
    value = _as_bytes(value)
    cdef bytes encoded_headers = _encode_headers(headers) if headers else None
    cdef Py_ssize_t key_size = 0 if key is None else PyBytes_GET_SIZE(key)
    cdef Py_ssize_t value_size = 0 if value is None else PyBytes_GET_SIZE(value)
    cdef Py_ssize_t headers_size = (
        1 if encoded_headers is None else PyBytes_GET_SIZE(encoded_headers)
    )
    cdef Py_ssize_t body = (
        1
        + _varint_size(_zigzag(timestamp_delta))
        + _varint_size(_zigzag(offset_delta))
        + _field_size(key)
        + _field_size(value)
        + headers_size
    )
    cdef Py_ssize_t start = PyByteArray_GET_SIZE(records)
    PyByteArray_Resize(records, start + _varint_size(_zigzag(body)) + body)
    cdef char* out = PyByteArray_AS_STRING(records) + start
    out = _put_varint(out, _zigzag(body))
    out[0] = 0  # record attributes: unused
    out = _put_varint(out + 1, _zigzag(timestamp_delta))
    out = _put_varint(out, _zigzag(offset_delta))
    out = _put_bytes(out, key, key_size)
    out = _put_bytes(out, value, value_size)
    if encoded_headers is None:
        out[0] = 0
    else:
        memcpy(out, PyBytes_AS_STRING(encoded_headers), headers_size)


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
