"""The compiled per-record path (`_open_batches.pyx`) against its pure-Python twin
(`open_batches.py`): two accumulators, one on each, take the same random appends, drains and
completions, and must answer alike at every step (the same futures or None, the same errors,
the same buffer counts, the same wake-ups of the sender) and build the same batches byte for
byte, whose futures resolve to the same metadata and run their callbacks in the same order.
Keys, nulls, headers, int64-edge timestamps, batches rolling over at batch.size, large values,
a full buffer and records too large for any batch are all drawn.

Both implementations run in every session, whatever PYKRAFT_NO_EXTENSIONS says (it only picks
which one producers use); `make codec-python` runs the producer's tests again on the twin.
"""

from __future__ import annotations

import functools
import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.client.errors import KafkaError
from pykraft.client.producer import accumulator, open_batches
from pykraft.client.producer.accumulator import ProducerBatch, RecordAccumulator
from pykraft.client.producer.future import FutureRecordMetadata
from pykraft.client.types import RecordMetadata, TopicPartition
from pykraft.proto import extensions
from pykraft.proto.record_batch import NO_PRODUCER_ID, Compression, decode_batch

_compiled = extensions.compiled("pykraft.client.producer._open_batches")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
PARTITIONS = [TopicPartition("t", p) for p in range(3)]

timestamps = st.integers(-1, 1 << 45) | st.sampled_from(
    [INT64_MIN, INT64_MAX, INT64_MIN - 1, INT64_MAX + 1, 0]
)
values = (
    st.none()
    | st.binary(max_size=200)
    | st.sampled_from([1000, 16_000, 70_000]).map(lambda size: b"v" * size)
)
header_lists = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3
) | st.just([(None, b"null key")])
appends = st.tuples(
    st.just("append"),
    st.sampled_from(PARTITIONS),
    timestamps,
    st.none() | st.binary(max_size=16),
    values,
    st.just([]) | header_lists,
    st.booleans(),  # abort_on_new_batch, as a keyless record on its sticky partition
)
steps = st.lists(
    appends | st.tuples(st.just("drain"), st.sampled_from(PARTITIONS)) | st.just(("finish",)),
    min_size=1,
    max_size=40,
)
limits = st.fixed_dictionaries(
    {
        "batch_size": st.integers(100, 40_000),
        "buffer_memory": st.integers(2_000, 400_000),
        "max_request_size": st.sampled_from([1_048_576, 20_000]),
        "compression": st.sampled_from([Compression.NONE, Compression.LZ4]),
    }
)
Outcome = tuple[str, object]


@dataclass
class Side:
    """One accumulator and what it handed out."""

    accumulator: RecordAccumulator
    wakeup: threading.Event
    futures: list[FutureRecordMetadata] = field(default_factory=list)
    drained: list[ProducerBatch] = field(default_factory=list)
    called: list[FutureRecordMetadata] = field(default_factory=list)


@contextmanager
def _open_batches(cls: type[open_batches.OpenBatches]) -> Iterator[None]:
    with mock.patch.object(accumulator, "OpenBatches", cls):
        yield


def _side(cls: type[open_batches.OpenBatches], limits: dict[str, object]) -> Side:
    settings = {"compression": Compression.NONE, **limits}
    wakeup = threading.Event()
    with _open_batches(cls):
        made = RecordAccumulator(linger_ms=0, wakeup=wakeup, **settings)  # type: ignore[arg-type]
    return Side(made, wakeup)


def _append(side: Side, step: tuple[object, ...]) -> Outcome:
    """The append's outcome: "none", "future" (kept), or the error's type and text."""
    _, tp, timestamp, key, value, headers, abort = step
    try:
        future = side.accumulator.append(
            tp,  # type: ignore[arg-type]
            timestamp,  # type: ignore[arg-type]
            key,  # type: ignore[arg-type]
            value,  # type: ignore[arg-type]
            headers,  # type: ignore[arg-type]
            0,
            abort,  # type: ignore[arg-type]
        )
    except Exception as error:
        return type(error).__name__, str(error)
    if future is None:
        return "none", None
    assert type(future) is FutureRecordMetadata
    future.add_done_callback(side.called.append)
    side.futures.append(future)
    return "future", len(side.futures)


def _drain(side: Side, tp: TopicPartition) -> Outcome:
    batches = side.accumulator.drain([tp], lambda _, taken: taken == 0, 0)
    side.drained.extend(batches)
    return "drained", [(b.builder.record_count(), b.builder.reserved_bytes) for b in batches]


def _finish(side: Side) -> list[bytes]:
    """Sends every drained batch (the same producer stamp each side), completes each, or fails
    every third, and frees it: the bytes each side would have sent."""
    sent = []
    for number, batch in enumerate(side.drained):
        stamp = (NO_PRODUCER_ID, -1, -1) if number % 2 else (7 + number, 3, 11 * number)
        sent.append(batch.seal(*stamp))
        if number % 3 == 2:
            batch.fail(KafkaError(f"batch {number} failed"))
        else:
            batch.complete(1000 * number, -1 if number % 2 else 5_000 + number)
        side.accumulator.deallocate(batch)
    side.drained.clear()
    return sent


def _step(side: Side, step: tuple[object, ...]) -> tuple[Outcome, int, bool]:
    """The step's outcome, the buffer bytes in use after it, and whether it woke the sender."""
    if step[0] == "append":
        outcome = _append(side, step)
    elif step[0] == "drain":
        outcome = _drain(side, step[1])  # type: ignore[arg-type]
    else:
        outcome = "sent", _finish(side)
    woken = side.wakeup.is_set()
    side.wakeup.clear()
    return outcome, side.accumulator.used_bytes(), woken


def _resolved(future: FutureRecordMetadata) -> RecordMetadata | str:
    try:
        return future.result(timeout=0)
    except KafkaError as error:
        return str(error)


@settings(max_examples=200, deadline=None)
@given(limits=limits, steps=steps)
def test_both_take_the_same_records_into_the_same_batches_and_futures(
    limits: dict[str, object], steps: list[tuple[object, ...]]
) -> None:
    compiled = _side(_compiled.OpenBatches, limits)
    pure = _side(open_batches.OpenBatches, limits)
    for step in [*steps, *(("drain", tp) for tp in PARTITIONS for _ in range(40)), ("finish",)]:
        assert _step(compiled, step) == _step(pure, step), step
    assert compiled.accumulator.used_bytes() == 0
    assert not compiled.accumulator.has_pending() and not pure.accumulator.has_pending()
    assert [_resolved(f) for f in compiled.futures] == [_resolved(f) for f in pure.futures]
    assert _callback_order(compiled) == _callback_order(pure)
    assert sorted(_callback_order(pure)) == list(range(len(pure.futures))), "each called once"
    counts = [side.accumulator.delivery_counts() for side in (compiled, pure)]
    assert len({(c.records_delivered, c.records_failed, str(c.last_error)) for c in counts}) == 1


def _callback_order(side: Side) -> list[int]:
    """The futures whose callbacks ran, by the order of their appends."""
    index = {id(future): number for number, future in enumerate(side.futures)}
    return [index[id(future)] for future in side.called]


def test_each_record_lands_at_its_index_in_its_batch() -> None:
    """The futures' offsets point at their own records in the batch both sides built."""
    for cls in (_compiled.OpenBatches, open_batches.OpenBatches):
        side = _side(cls, {"batch_size": 300, "buffer_memory": 1 << 20})
        for number in range(12):
            key = b"%d" % number
            assert _append(side, ("append", PARTITIONS[0], number, key, b"x" * 30, [], False))
        while _drain(side, PARTITIONS[0])[1]:
            pass
        assert len(side.drained) > 1, "the records rolled over into more batches"
        batches = [decode_batch(b) for b in _finish(side)]
        delivered = [(n, f) for n, f in enumerate(side.futures) if not f.exception(timeout=0)]
        for number, future in delivered:
            batch, index = divmod(future.result(timeout=0).offset, 1000)  # as _finish completes
            assert batches[batch][index].key == b"%d" % number
        assert {f.result(timeout=0).offset // 1000 for _, f in delivered} >= {0, 1}


def test_only_the_compiled_futures_are_untracked_by_the_collector() -> None:
    """A caller keeping every future of a run must not have the collector walk them; an
    untracked future still keeps its batch alive through a collection."""
    compiled = _side(_compiled.OpenBatches, {"batch_size": 16384, "buffer_memory": 1 << 20})
    pure = _side(open_batches.OpenBatches, {"batch_size": 16384, "buffer_memory": 1 << 20})
    step: tuple[object, ...] = ("append", PARTITIONS[0], 5, b"k", b"v", [], False)
    _append(compiled, step), _append(pure, step)
    assert not gc.is_tracked(compiled.futures[0]) and gc.is_tracked(pure.futures[0])
    gc.collect()
    for side in (compiled, pure):
        _drain(side, PARTITIONS[0])
        _finish(side)
    assert _resolved(compiled.futures[0]) == _resolved(pure.futures[0])
    assert functools.reduce(lambda done, f: done and f.done(), compiled.futures, True)


def test_both_stamp_a_record_without_a_timestamp_now() -> None:
    """The record's timestamp in the batch and its metadata's are the wall clock's, in ms."""
    for cls in (_compiled.OpenBatches, open_batches.OpenBatches):
        side = _side(cls, {"batch_size": 16384, "buffer_memory": 1 << 20})
        before_ms = time.time_ns() // 1_000_000
        _append(side, ("append", PARTITIONS[0], None, None, b"v", [], False))
        after_ms = time.time_ns() // 1_000_000
        (batch,) = side.accumulator.drain([PARTITIONS[0]], lambda _, taken: taken == 0, 0)
        (record,) = decode_batch(batch.seal(NO_PRODUCER_ID, -1, -1))
        batch.complete(0, -1)
        assert before_ms <= record.timestamp <= after_ms, cls
        assert side.futures[0].result(timeout=0).timestamp == record.timestamp
