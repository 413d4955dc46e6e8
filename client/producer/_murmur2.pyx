# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled `murmur2` of partitioner.py (Java's Utils.murmur2, bit for bit); the
partitioner picks it unless PYKRAFT_NO_EXTENSIONS is set (`pykraft.proto.extensions`)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_GET_SIZE

include "murmur2.pxi"


def murmur2(data) -> int:
    """A signed 32-bit hash of `data`, as partitioner.murmur2_python."""
    cdef bytes raw = data if PyBytes_Check(data) else bytes(data)
    return murmur2_of(<const uint8_t*>PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))
