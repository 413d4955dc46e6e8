# Java's Utils.murmur2 over raw bytes (seed 0x9747b28c, 32-bit arithmetic), shared by the compiled
# `_murmur2.murmur2` and the compiled send path's partition choice (`_open_batches.pyx`).

from libc.stdint cimport int32_t, uint8_t, uint32_t


cdef inline int32_t murmur2_of(const uint8_t* p, Py_ssize_t length) noexcept:
    """A signed 32-bit hash of `length` bytes at `p`, as partitioner.murmur2_python."""
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
