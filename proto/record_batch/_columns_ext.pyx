# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled twin of `columns._decode_records`: the same records and the same errors,
decoded in C into scratch buffers and handed to the columns once per batch (a few Python calls
a batch instead of several a record). `columns` selects it unless PYKRAFT_NO_EXTENSIONS=1;
tests/unit/proto/test_record_batch_columns.py checks both on the same batches."""

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy

from pykraft.proto.record_batch.header import BatchError, TimestampType


cdef class _Scratch:
    """One binary column's elements of this batch: relative int32 end offsets, data, validity."""

    cdef int32_t *ends
    cdef uint8_t *data
    cdef uint8_t *valid
    cdef Py_ssize_t count
    cdef Py_ssize_t size

    def __cinit__(self, Py_ssize_t elements_max, Py_ssize_t bytes_max):
        self.ends = <int32_t *> PyMem_Malloc(sizeof(int32_t) * (elements_max + 1))
        self.data = <uint8_t *> PyMem_Malloc(bytes_max + 1)
        self.valid = <uint8_t *> PyMem_Malloc(elements_max + 1)
        if not self.ends or not self.data or not self.valid:
            raise MemoryError()
        self.count = 0
        self.size = 0

    def __dealloc__(self):
        PyMem_Free(self.ends)
        PyMem_Free(self.data)
        PyMem_Free(self.valid)

    cdef inline void add(self, const uint8_t *source, Py_ssize_t start, Py_ssize_t end):
        if start < 0:
            self.valid[self.count] = 0
        else:
            memcpy(self.data + self.size, source + start, end - start)
            self.size += end - start
            self.valid[self.count] = 1
        self.ends[self.count] = <int32_t> self.size
        self.count += 1

    cdef void flush(self, column):
        """Appends the scratch elements to the BinaryColumn `column`."""
        cdef Py_ssize_t base = column.size, i
        cdef int32_t *shifted = <int32_t *> PyMem_Malloc(sizeof(int32_t) * (self.count + 1))
        if not shifted:
            raise MemoryError()
        try:
            for i in range(self.count):
                shifted[i] = <int32_t> (self.ends[i] + base)
            column.offsets.frombytes((<char *> shifted)[: sizeof(int32_t) * self.count])
        finally:
            PyMem_Free(shifted)
        column.chunks.append((<char *> self.data)[: self.size])
        column.size += self.size
        column.valid += (<char *> self.valid)[: self.count]


class _EarlyEnd(Exception):
    pass


cdef inline int64_t _varint(const uint8_t *data, Py_ssize_t size, Py_ssize_t *pos, int bits) except? -1:
    """The zig-zag varint at pos[0] (32 bits: at most 5 bytes; 64: 10), moving pos[0] past it;
    raises as `decode.read_varint` does."""
    cdef uint64_t raw = 0, byte
    cdef int shift = 0
    cdef Py_ssize_t start = pos[0], index
    cdef Py_ssize_t last = start + (bits + 6) // 7
    for index in range(start, last):
        if index >= size:
            raise _EarlyEnd()
        byte = data[index]
        if shift == 63 and (byte & 0x7F) > 1:
            raise BatchError(f"varint at {start} overflows {bits} bits")
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            if bits == 32 and (raw >> 32):
                raise BatchError(f"varint at {start} overflows {bits} bits")
            pos[0] = index + 1
            return <int64_t> ((raw >> 1) ^ (-(raw & 1)))
        shift += 7
    raise BatchError(f"varint at {start} is longer than {(bits + 6) // 7} bytes")


cdef inline Py_ssize_t _span(const uint8_t *data, Py_ssize_t size, Py_ssize_t *pos) except -2:
    """The start of the nullable bytes at pos[0] (-1 for null), pos[0] moved past them."""
    cdef int64_t length = _varint(data, size, pos, 32)
    cdef Py_ssize_t start = pos[0]
    if length < 0:
        if length != -1:
            raise BatchError(f"negative length {length}")
        return -1
    if start + length > size:
        raise _EarlyEnd()
    pos[0] = start + length
    return start


def decode_records(bytes payload, header, columns, int64_t offset_min):
    """As `columns._decode_records`: appends the records at or after `offset_min`."""
    cdef const uint8_t *data = <const uint8_t *> payload
    cdef Py_ssize_t size = len(payload), pos = 0, record_end, count, i
    cdef Py_ssize_t key_start, key_end, value_start, value_end, hk, hv
    cdef int64_t length, timestamp_delta, offset_delta, previous_delta = -1, header_count, j
    cdef int64_t base_offset = header.base_offset, base_timestamp = header.base_timestamp
    cdef int64_t max_timestamp = header.max_timestamp, last_delta = header.last_offset_delta
    cdef bint create_time = header.timestamp_type is TimestampType.CREATE_TIME, keep
    count = header.record_count
    if count > size:  # a record takes at least a byte: these cannot all be there
        raise BatchError(f"records end early: {count} declared")
    cdef int64_t *offsets = <int64_t *> PyMem_Malloc(sizeof(int64_t) * count)
    cdef int64_t *timestamps = <int64_t *> PyMem_Malloc(sizeof(int64_t) * count)
    cdef int32_t *header_ends = <int32_t *> PyMem_Malloc(sizeof(int32_t) * count)
    cdef Py_ssize_t appended = 0
    cdef _Scratch keys = _Scratch(count, size), values = _Scratch(count, size)
    cdef _Scratch header_keys = _Scratch(size // 2, size), header_values = _Scratch(size // 2, size)
    if not offsets or not timestamps or not header_ends:
        PyMem_Free(offsets)
        PyMem_Free(timestamps)
        PyMem_Free(header_ends)
        raise MemoryError()
    try:
        try:
            for i in range(count):
                length = _varint(data, size, &pos, 32)
                record_end = pos + length
                if pos >= size:
                    raise _EarlyEnd()
                pos += 1  # the unused record attributes
                timestamp_delta = _varint(data, size, &pos, 64)
                offset_delta = _varint(data, size, &pos, 32)
                if not previous_delta < offset_delta <= last_delta:
                    raise BatchError(f"offset delta {offset_delta} after {previous_delta}")
                previous_delta = offset_delta
                key_start = _span(data, size, &pos)
                key_end = pos
                value_start = _span(data, size, &pos)
                value_end = pos
                keep = base_offset + offset_delta >= offset_min
                header_count = _varint(data, size, &pos, 32)
                if not 0 <= header_count <= size - pos:
                    raise BatchError(f"invalid header count {header_count}")
                for j in range(header_count):
                    hk = _span(data, size, &pos)
                    if hk < 0:
                        raise BatchError("a record header key may not be null")
                    try:
                        (<char *> data)[hk:pos].decode()
                    except UnicodeDecodeError:
                        raise BatchError("a record header key is not utf-8") from None
                    if keep:
                        header_keys.add(data, hk, pos)
                    hv = _span(data, size, &pos)
                    if keep:
                        header_values.add(data, hv, pos)
                if pos != record_end:
                    raise BatchError(f"record ends at {pos}, its length says {record_end}")
                if not keep:
                    continue
                offsets[appended] = base_offset + offset_delta
                timestamps[appended] = base_timestamp + timestamp_delta if create_time else max_timestamp
                keys.add(data, key_start, key_end)
                values.add(data, value_start, value_end)
                header_ends[appended] = <int32_t> header_keys.count
                appended += 1
        except _EarlyEnd:
            raise BatchError(f"records end early: {count} declared") from None
        if pos != size:
            raise BatchError(f"{size - pos} bytes follow the last of the batch's records")
        _flush(columns, appended, offsets, timestamps, header_ends, int(header.timestamp_type))
        keys.flush(columns.keys)
        values.flush(columns.values)
        header_keys.flush(columns.header_keys)
        header_values.flush(columns.header_values)
    finally:
        PyMem_Free(offsets)
        PyMem_Free(timestamps)
        PyMem_Free(header_ends)


cdef void _flush(columns, Py_ssize_t rows, int64_t *offsets, int64_t *timestamps,
                 int32_t *header_ends, int timestamp_type) except *:
    cdef Py_ssize_t base = len(columns.header_keys), i
    for i in range(rows):
        header_ends[i] += <int32_t> base
    columns.offsets.frombytes((<char *> offsets)[: sizeof(int64_t) * rows])
    columns.timestamps.frombytes((<char *> timestamps)[: sizeof(int64_t) * rows])
    columns.header_rows.frombytes((<char *> header_ends)[: sizeof(int32_t) * rows])
    columns.timestamp_types.frombytes(bytes([timestamp_type]) * rows)
