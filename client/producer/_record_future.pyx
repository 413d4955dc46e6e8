# cython: language_level=3
"""The compiled `record_future` of accumulator.py: a record's FutureRecordMetadata, the same
object the class's own constructor makes, but built through its slots and then left out of the
garbage collector's lists (`slots.pxi`).

A producer's caller typically keeps every future of a run; the collector walking hundreds of
thousands of them again and again cost about 0.3 us a record sent. No reference cycle outlives
a batch through a future: the one way back to it, its batch's callback list, is emptied when
the batch's result is set, and closing the producer sets every batch's result."""

from pykraft.client.producer.future import FutureRecordMetadata

include "slots.pxi"

cdef Py_ssize_t[4] _FUTURE_SLOTS
slot_offsets(FutureRecordMetadata, ("_result", "_tp", "_index", "_timestamp_ms"), _FUTURE_SLOTS)


def record_future(result, tp, index, timestamp_ms):
    """FutureRecordMetadata(result, tp, index, timestamp_ms), untracked by the collector."""
    future = new_instance(FutureRecordMetadata)
    set_slot(future, _FUTURE_SLOTS[0], result)
    set_slot(future, _FUTURE_SLOTS[1], tp)
    set_slot(future, _FUTURE_SLOTS[2], index)
    set_slot(future, _FUTURE_SLOTS[3], timestamp_ms)
    untrack(future)
    return future
