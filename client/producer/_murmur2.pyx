# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled `murmur2` of partitioner.py (Java's Utils.murmur2, bit for bit); the
partitioner picks it unless PYKRAFT_NO_EXTENSIONS is set (`pykraft.proto.extensions`)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, uint8_t, uint32_t


def murmur2(data) -> int:
    """A signed 32-bit hash of `data`, as partitioner.murmur2_python."""
    cdef bytes raw = data if PyBytes_Check(data) else bytes(data)
    cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t length = PyBytes_GET_SIZE(raw)
    cdef uint32_t m = 0x5BD1E995
    cdef uint32_t h = 0x9747B28C ^ <uint32_t>length
    cdef uint32_t k
    cdef Py_ssize_t whole = length - length % 4
    cdef Py_ssize_t i
    for i in range(0, whole, 4):
        k = p[i] | (<uint32_t>p[i + 1] << 8) | (<uint32_t>p[i + 2] << 16) | (<uint32_t>p[i + 3] << 24)
        k *= m
        k ^= k >> 24
        k *= m
        h = (h * m) ^ k
    cdef Py_ssize_t tail = length % 4
    if tail == 3:
        h ^= <uint32_t>p[whole + 2] << 16
    if tail >= 2:
        h ^= <uint32_t>p[whole + 1] << 8
    if tail >= 1:
        h ^= p[whole]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return <int32_t>h
