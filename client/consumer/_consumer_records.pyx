# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled `consumer_records` of fetch_buffer.py: a batch's decoded Records turned into
the ConsumerRecords the consumer hands out, the same tuples the pure loop builds
(tests/unit/client/consumer/test_consumer_records_extension.py)."""


from pykraft.client.types import ConsumerRecord
from pykraft.proto.record_batch import Record

include "slots.pxi"

cdef Py_ssize_t[5] _RECORD_SLOTS
slot_offsets(Record, ("offset", "timestamp", "key", "value", "headers"), _RECORD_SLOTS)


def consumer_records(str topic, partition, timestamp_type, list records, position):
    """The records at or after `position`, as fetch_buffer.consumer_records_python."""
    cdef list out = []
    cdef tuple headers
    for record in records:
        offset = get_slot(record, _RECORD_SLOTS[0])
        if offset < position:
            continue
        headers = get_slot(record, _RECORD_SLOTS[4])
        row = new_instance(ConsumerRecord, 8)
        set_item(row, 0, topic)
        set_item(row, 1, partition)
        set_item(row, 2, offset)
        set_item(row, 3, get_slot(record, _RECORD_SLOTS[1]))
        set_item(row, 4, timestamp_type)
        set_item(row, 5, get_slot(record, _RECORD_SLOTS[2]))
        set_item(row, 6, get_slot(record, _RECORD_SLOTS[3]))
        set_item(row, 7, tuple([(h.key, h.value) for h in headers]) if headers else ())
        untrack(row)
        out.append(row)
    return out
