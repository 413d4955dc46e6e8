# cython: language_level=3, boundscheck=False, wraparound=False
"""PartitionRecords, a million of which make a large image, in and out of the codec's bytes:
the compiled `read_partition_run` of partition_runs.py (see its module doc), which the snapshot
loader picks, `encode_partition_body`, the codec's encoder of a PartitionRecord's fields
(`codec.encode_partition_body_python`), and `partition_record`, a registration's record as
an image writes it (`image.partition_record_python`), unless PYKRAFT_NO_EXTENSIONS is set
(`pykraft.proto.extensions`).

A frame is its body's length (uvarint), then the type id and version (uvarints) and
PartitionRecord's fields in order: the topic id (16 bytes), the partition id, replicas and isr
(a uvarint count, then zig-zag varints), leader, leader epoch and partition epoch (zig-zag
varints), and from version 1 adding and removing replicas (as replicas). Anything this reader
refuses as the codec does (a varint not canonical or beyond 64 bits, a field running past the
frame, bytes left in it) or does not read (another type, a later version) ends the run before
that frame."""

import dataclasses

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.object cimport PyObject_GenericSetAttr
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcmp, memcpy

from pykraft.metadata_log.records import PartitionRecord

# A 64-bit value spreads over at most ten 7-bit groups, the tenth holding only bit 63.
DEF VARINT_BYTES_MAX = 10
DEF LAST_GROUP_MAX = 1
DEF UUID_BYTES = 16

cdef uint64_t PARTITION_TYPE_ID = PartitionRecord.TYPE_ID
cdef uint64_t PARTITION_VERSION = PartitionRecord.VERSION

# Registrations and records are made as object.__setattr__ would fill them, field by field,
# without the frozen dataclasses' generated __init__ (a Python frame and a call per field: about
# half of what reading or writing a partition cost). Neither has a __post_init__; a field added
# or reordered stops the import (the record) or the first read (the registration, whose module,
# image.py, imports this one) rather than make objects without it.
RECORD_FIELDS = ("topic_id", "partition_id", "replicas", "isr", "leader", "leader_epoch",
                 "partition_epoch", "adding_replicas", "removing_replicas")
REGISTRATION_FIELDS = RECORD_FIELDS[2:]
assert tuple(f.name for f in dataclasses.fields(PartitionRecord)) == RECORD_FIELDS
assert not hasattr(PartitionRecord, "__post_init__")
cdef object new_object = object.__new__
cdef str TOPIC_ID = "topic_id", PARTITION_ID = "partition_id"
cdef str REPLICAS = "replicas", ISR = "isr", LEADER = "leader", LEADER_EPOCH = "leader_epoch"
cdef str PARTITION_EPOCH = "partition_epoch", ADDING = "adding_replicas"
cdef str REMOVING = "removing_replicas"
cdef object Registration = None  # PartitionRegistration, once checked


cdef object registration_type():
    global Registration
    if Registration is None:
        from pykraft.metadata_log.image import PartitionRegistration
        fields = tuple(f.name for f in dataclasses.fields(PartitionRegistration))
        assert fields == REGISTRATION_FIELDS, fields
        assert not hasattr(PartitionRegistration, "__post_init__")
        Registration = PartitionRegistration
    return Registration


cdef object registration(object cls, object replicas, object isr, object leader,
                         object leader_epoch, object partition_epoch, object adding,
                         object removing):
    """PartitionRegistration(replicas, isr, ...) (its class `cls`), made field by field."""
    made = new_object(cls)
    PyObject_GenericSetAttr(made, REPLICAS, replicas)
    PyObject_GenericSetAttr(made, ISR, isr)
    PyObject_GenericSetAttr(made, LEADER, leader)
    PyObject_GenericSetAttr(made, LEADER_EPOCH, leader_epoch)
    PyObject_GenericSetAttr(made, PARTITION_EPOCH, partition_epoch)
    PyObject_GenericSetAttr(made, ADDING, adding)
    PyObject_GenericSetAttr(made, REMOVING, removing)
    return made


cdef inline bint read_uvarint(const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos,
                              uint64_t* value) noexcept:
    """A canonical uvarint of at most 64 bits at pos[0] (before `end`) into value[0], pos[0]
    moved past it; False, moving nothing, for anything else (the codec's refusals)."""
    cdef Py_ssize_t p = pos[0]
    cdef Py_ssize_t stop = min(end, p + VARINT_BYTES_MAX)
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef unsigned char byte
    while p < stop:
        byte = buf[p]
        result |= (<uint64_t>(byte & 0x7F)) << shift
        p += 1
        if byte < 0x80:
            if byte == 0 and p - 1 > pos[0]:
                return False  # non-canonical
            if p - pos[0] == VARINT_BYTES_MAX and byte > LAST_GROUP_MAX:
                return False  # beyond 64 bits
            pos[0], value[0] = p, result
            return True
        shift += 7
    return False


cdef inline bint read_int(const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos,
                          int64_t* value) noexcept:
    """A zig-zag varint (see read_uvarint)."""
    cdef uint64_t raw
    if not read_uvarint(buf, end, pos, &raw):
        return False
    value[0] = (<int64_t>(raw >> 1)) ^ (-<int64_t>(raw & 1))
    return True


cdef object read_ints(const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos):
    """A tuple of zig-zag varints (a uvarint count first); None if it does not read whole."""
    cdef uint64_t count
    cdef int64_t item
    cdef Py_ssize_t index
    cdef object value
    if not read_uvarint(buf, end, pos, &count) or count > <uint64_t>(end - pos[0]):
        return None
    items = PyTuple_New(<Py_ssize_t>count)
    for index in range(<Py_ssize_t>count):
        if not read_int(buf, end, pos, &item):
            return None
        value = item
        Py_INCREF(value)
        PyTuple_SET_ITEM(items, index, value)
    return items


def read_partition_run(bytes data, Py_ssize_t pos, Py_ssize_t count, bytes topic_id,
                       dict partitions):
    """As partition_runs.read_partition_run_python."""
    cdef const unsigned char* buf = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    cdef const unsigned char* topic = <const unsigned char*>PyBytes_AS_STRING(topic_id)
    cdef Py_ssize_t taken = 0, p, end
    cdef uint64_t size, type_id, version
    cdef int64_t partition_id, leader, leader_epoch, partition_epoch
    cdef object key
    if PyBytes_GET_SIZE(topic_id) != UUID_BYTES:
        raise ValueError("a topic id is 16 bytes")
    if pos < 0 or pos > n:
        raise ValueError(f"position {pos} outside the {n} bytes")
    cls = registration_type()
    while taken < count:
        p = pos
        if not read_uvarint(buf, n, &p, &size) or size > <uint64_t>(n - p):
            break
        end = p + <Py_ssize_t>size
        if not read_uvarint(buf, end, &p, &type_id) or type_id != PARTITION_TYPE_ID:
            break
        if not read_uvarint(buf, end, &p, &version) or version > PARTITION_VERSION:
            break
        if end - p < UUID_BYTES or memcmp(buf + p, topic, UUID_BYTES) != 0:
            break
        p += UUID_BYTES
        if not read_int(buf, end, &p, &partition_id):
            break
        key = partition_id
        if key in partitions:
            break
        replicas = read_ints(buf, end, &p)
        if replicas is None:
            break
        isr = read_ints(buf, end, &p)
        if isr is None:
            break
        if not (read_int(buf, end, &p, &leader) and read_int(buf, end, &p, &leader_epoch)
                and read_int(buf, end, &p, &partition_epoch)):
            break
        adding = removing = ()
        if version >= 1:
            adding = read_ints(buf, end, &p)
            if adding is None:
                break
            removing = read_ints(buf, end, &p)
            if removing is None:
                break
        if p != end:
            break
        partitions[key] = registration(
            cls, replicas, isr, leader, leader_epoch, partition_epoch, adding, removing
        )
        pos, taken = end, taken + 1
    return pos, taken


# What one int or count takes at most, and the fields of a PartitionRecord past its topic id
# (partition id, four counts, leader and two epochs).
DEF ZIGZAG_BYTES_MAX = 10
DEF SCALARS = 8


cdef inline Py_ssize_t write_uvarint(unsigned char* out, uint64_t value) noexcept:
    cdef Py_ssize_t written = 0
    while value >= 0x80:
        out[written] = (value & 0x7F) | 0x80
        value >>= 7
        written += 1
    out[written] = <unsigned char>value
    return written + 1


cdef inline Py_ssize_t write_int(unsigned char* out, object value) except -1:
    """A zig-zag varint of `value`; ValueError, as the codec's, beyond 64 bits."""
    cdef int64_t number
    try:
        number = value
    except OverflowError:
        raise ValueError(f"integer {value} does not fit in 64 bits") from None
    return write_uvarint(out, (<uint64_t>number << 1) ^ <uint64_t>(number >> 63))


cdef inline Py_ssize_t write_ints(unsigned char* out, object values) except -1:
    cdef Py_ssize_t written = write_uvarint(out, len(values))
    for value in values:
        written += write_int(out + written, value)
    return written


def encode_partition_body(bytearray buf, record) -> None:
    """Appends `record`'s fields to `buf`, as the codec's generic encoder of PartitionRecord
    does (the same bytes, the same ValueError for an int beyond 64 bits)."""
    topic_id = record.topic_id.bytes
    tuples = (record.replicas, record.isr, record.adding_replicas, record.removing_replicas)
    cdef Py_ssize_t items = sum(len(t) for t in tuples)
    cdef Py_ssize_t start = PyByteArray_GET_SIZE(buf)
    PyByteArray_Resize(buf, start + UUID_BYTES + ZIGZAG_BYTES_MAX * (SCALARS + items))
    cdef unsigned char* out = <unsigned char*>PyByteArray_AS_STRING(buf) + start
    cdef Py_ssize_t n = UUID_BYTES
    try:
        memcpy(out, PyBytes_AS_STRING(topic_id), UUID_BYTES)
        n += write_int(out + n, record.partition_id)
        n += write_ints(out + n, tuples[0])
        n += write_ints(out + n, tuples[1])
        n += write_int(out + n, record.leader)
        n += write_int(out + n, record.leader_epoch)
        n += write_int(out + n, record.partition_epoch)
        n += write_ints(out + n, tuples[2])
        n += write_ints(out + n, tuples[3])
    except BaseException:
        PyByteArray_Resize(buf, start)
        raise
    PyByteArray_Resize(buf, start + n)


def partition_record(topic_id, partition_id, registration):
    """`registration.to_record(topic_id, partition_id)` (image.py), made field by field."""
    made = new_object(PartitionRecord)
    PyObject_GenericSetAttr(made, TOPIC_ID, topic_id)
    PyObject_GenericSetAttr(made, PARTITION_ID, partition_id)
    PyObject_GenericSetAttr(made, REPLICAS, registration.replicas)
    PyObject_GenericSetAttr(made, ISR, registration.isr)
    PyObject_GenericSetAttr(made, LEADER, registration.leader)
    PyObject_GenericSetAttr(made, LEADER_EPOCH, registration.leader_epoch)
    PyObject_GenericSetAttr(made, PARTITION_EPOCH, registration.partition_epoch)
    PyObject_GenericSetAttr(made, ADDING, registration.adding_replicas)
    PyObject_GenericSetAttr(made, REMOVING, registration.removing_replicas)
    return made
