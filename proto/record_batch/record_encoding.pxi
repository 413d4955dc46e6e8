# Encoding one record of a RecordBatch v2 into a bytearray, as build.encode_record_python does,
# byte for byte: shared by the codec (`_codec.encode_record`, the broker's and the cleaner's
# builder) and the producer's compiled append (`client/producer/_open_batches.pyx`), which
# encodes each record straight into its open batch's buffer.

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy

from pykraft.proto.record_batch.header import BatchError
from pykraft.proto.record_batch.records import RecordHeader


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


cdef int encode_into(
    bytearray records, int64_t timestamp_delta, int64_t offset_delta, key, value, headers
) except -1:
    """Appends one record (its Length varint first) to `records`. It raises (BatchError, or
    TypeError for what is not bytes-like) before `records` changes, so a refused record leaves
    no trace."""
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
    return 0
