"""RecordAccumulator: batches by size and linger, and a buffer bound that blocks, then fails."""

from __future__ import annotations

import threading
import time

import pytest

from pykraft.client.clock import monotonic_ms
from pykraft.client.producer.accumulator import (
    BufferExhaustedError,
    ProducerBatch,
    RecordAccumulator,
)
from pykraft.client.producer.open_batches import record_size_bytes
from pykraft.client.types import TopicPartition
from pykraft.proto.record_batch import Compression, decode_batch

TP = TopicPartition("t", 0)


def first_only(_batch: ProducerBatch, taken: int) -> bool:
    """A drain's `may_send` that takes the head batch of each partition only."""
    return taken == 0


def accumulator(
    *, batch_size: int = 16384, linger_ms: int = 0, buffer_memory: int = 1 << 20
) -> RecordAccumulator:
    return RecordAccumulator(
        batch_size=batch_size,
        linger_ms=linger_ms,
        buffer_memory=buffer_memory,
        compression=Compression.NONE,
        wakeup=threading.Event(),
    )


def test_records_fill_a_batch_up_to_batch_size_then_open_another() -> None:
    acc = accumulator(batch_size=300, linger_ms=60_000)
    for i in range(10):
        acc.append(TP, 1000, None, b"%d" % i + b"x" * 40, (), max_block_ms=0)
    ready, _, _ = acc.ready(monotonic_ms())
    assert ready == [TP], "a full batch is ready before linger_ms"
    batches = acc.drain([TP], first_only, monotonic_ms())
    first = decode_batch(batches[0].builder.build())
    assert 1 < len(first) < 10
    assert len(batches[0].builder.build()) <= 300
    assert [r.value[:1] for r in first if r.value] == [b"%d" % i for i in range(len(first))]


def test_a_batch_waits_for_linger_ms() -> None:
    acc = accumulator(linger_ms=10_000)
    acc.append(TP, 1000, b"k", b"v", (), max_block_ms=0)
    now = monotonic_ms()
    ready, lingering, delay_ms = acc.ready(now)
    assert ready == [] and lingering == [TP]
    assert 9_000 < delay_ms <= 10_000
    assert acc.ready(now + 10_001)[0] == [TP]


def test_flush_makes_lingering_batches_ready_and_waits_for_them() -> None:
    acc = accumulator(linger_ms=60_000)
    future = acc.append(TP, 1000, None, b"v", (), max_block_ms=0)
    assert future is not None
    flushed: list[bool] = []
    flusher = threading.Thread(target=lambda: flushed.append(acc.flush(5)))
    flusher.start()
    deadline = time.monotonic() + 5
    while acc.ready(monotonic_ms())[0] != [TP]:
        assert time.monotonic() < deadline, "flush never made the batch ready"
        time.sleep(0.001)
    (batch,) = acc.drain([TP], first_only, monotonic_ms())
    batch.complete(5, -1)
    acc.deallocate(batch)
    flusher.join(5)
    assert flushed == [True]
    assert future.result(0).offset == 5


def test_flush_waits_for_every_batch_whatever_order_they_finish_in() -> None:
    acc = accumulator(batch_size=100)
    tps = [TopicPartition("t", p) for p in range(3)]
    for number in range(12):
        acc.append(tps[number % 3], 1000, None, b"x" * 60, (), max_block_ms=0)
    batches = [b for _ in range(4) for b in acc.drain(tps, first_only, monotonic_ms())]
    assert len(batches) == 12
    pending = list(batches)  # what a flush started now waits for, kept across its wake-ups
    for batch in batches[1:] + batches[:1]:  # the first one finishes last
        assert not acc._all_freed(pending), "flush would return before every batch was done"
        batch.complete(0, -1)
        acc.deallocate(batch)
    assert acc._all_freed(pending)
    assert acc.flush(0)


def test_appends_block_while_the_buffer_is_full_then_raise() -> None:
    size = record_size_bytes(None, b"x" * 100, ())
    acc = accumulator(buffer_memory=size + 10)
    acc.append(TP, 1000, None, b"x" * 100, (), max_block_ms=0)
    started = time.monotonic()
    with pytest.raises(BufferExhaustedError, match="buffer_memory"):
        acc.append(TP, 1000, None, b"x" * 100, (), max_block_ms=100)
    assert time.monotonic() - started >= 0.09
    assert acc.used_bytes() == size, "the refused record reserved nothing"


def test_a_blocked_append_goes_through_once_space_is_freed() -> None:
    size = record_size_bytes(None, b"x" * 100, ())
    acc = accumulator(buffer_memory=size + 10)
    acc.append(TP, 1000, None, b"x" * 100, (), max_block_ms=0)
    (batch,) = acc.drain([TP], first_only, monotonic_ms())
    results: list[object] = []
    appender = threading.Thread(
        target=lambda: results.append(acc.append(TP, 1, None, b"y" * 100, (), max_block_ms=5000))
    )
    appender.start()
    appender.join(0.05)
    assert appender.is_alive(), "the append blocks while the buffer is full"
    batch.complete(0, -1)
    acc.deallocate(batch)
    appender.join(5)
    assert results and results[0] is not None
    assert acc.used_bytes() == size


def test_abort_on_new_batch_adds_nothing() -> None:
    acc = accumulator()
    assert acc.append(TP, 1000, None, b"v", (), max_block_ms=0, abort_on_new_batch=True) is None
    assert acc.used_bytes() == 0
    assert acc.append(TP, 1000, None, b"v", (), max_block_ms=0) is not None
    assert acc.append(TP, 1000, None, b"w", (), max_block_ms=0, abort_on_new_batch=True)


def test_queued_batches_expire_after_the_delivery_timeout() -> None:
    acc = accumulator(linger_ms=60_000)
    acc.append(TP, 1000, None, b"v", (), max_block_ms=0)
    now = monotonic_ms()
    assert acc.expire(now, 1000) == []
    (expired,) = acc.expire(now + 1001, 1000)
    assert expired.tp == TP


def test_a_record_the_builder_refuses_leaves_no_trace() -> None:
    acc = accumulator()
    with pytest.raises(ValueError, match="timestamp"):
        acc.append(TP, 2**63, None, b"v", (), max_block_ms=0)  # beyond int64
    assert acc.used_bytes() == 0
    assert not acc.has_pending()
    acc.append(TP, 1000, None, b"ok", (), max_block_ms=0)
    (batch,) = acc.drain([TP], first_only, monotonic_ms())
    assert [r.value for r in decode_batch(batch.builder.build())] == [b"ok"]


def test_an_expired_batch_takes_no_more_records() -> None:
    acc = accumulator(linger_ms=60_000)
    acc.append(TP, 1000, None, b"old", (), max_block_ms=0)
    (expired,) = acc.expire(monotonic_ms() + 10_000, delivery_timeout_ms=1)
    expired.fail(RuntimeError("expired"))
    acc.deallocate(expired)
    future = acc.append(TP, 1000, None, b"new", (), max_block_ms=0)
    assert future is not None and not future.done()
    assert acc.used_bytes() == record_size_bytes(None, b"new", ())
    (batch,) = acc.drain([TP], first_only, monotonic_ms())
    assert batch is not expired


def test_delivery_counts_count_each_done_batch_once_with_the_last_error() -> None:
    acc = accumulator(batch_size=100)
    for value in (b"a" * 40, b"b" * 40, b"c" * 40):
        acc.append(TP, 1000, None, value, (), max_block_ms=0)
    first, second = (acc.drain([TP], first_only, monotonic_ms())[0] for _ in range(2))
    first.complete(0, -1)
    acc.deallocate(first)
    acc.deallocate(first)  # a second deallocate counts nothing
    error = RuntimeError("refused")
    second.fail(error)
    acc.deallocate(second)
    counts = acc.delivery_counts()
    delivered, failed = first.builder.record_count(), second.builder.record_count()
    assert (counts.records_delivered, counts.records_failed) == (delivered, failed)
    assert counts.last_error is error


def test_a_record_opening_a_batch_wakes_the_sender_and_one_joining_it_does_not() -> None:
    """Kafka's producer wakes its sender when an append creates a batch (newBatchCreated): the
    sender sleeps until the earliest linger it knows of, 100 ms when it knows of none, so a
    new batch with linger_ms 0 would otherwise wait out that sleep."""
    wakeup = threading.Event()
    acc = RecordAccumulator(
        batch_size=16384, linger_ms=0, buffer_memory=1 << 20, compression=Compression.NONE,
        wakeup=wakeup,
    )  # fmt: skip
    acc.append(TP, 1000, None, b"v", (), max_block_ms=0)
    assert wakeup.is_set(), "a new batch wakes the sender"
    wakeup.clear()
    acc.append(TP, 1000, None, b"w", (), max_block_ms=0)
    assert not wakeup.is_set(), "a record joining an open batch that is not full wakes nothing"
    acc.append(TopicPartition("t", 1), 1000, None, b"v", (), max_block_ms=0)
    assert wakeup.is_set(), "a new batch of another partition wakes the sender"


def take_all(_batch: ProducerBatch, _taken: int) -> bool:
    """A drain's `may_send` with no in-flight limit."""
    return True


def test_a_drain_takes_a_partitions_full_batches_but_not_a_lingering_one() -> None:
    """Every batch with a successor is full and goes with the head; the last one waits for its
    linger (taken early, it would close half empty and cost a request more)."""
    acc = accumulator(batch_size=200, linger_ms=60_000)  # a record of 80 bytes a batch
    for value in (b"a" * 80, b"b" * 80, b"c" * 80):
        acc.append(TP, 1000, None, value, (), max_block_ms=0)
    now = monotonic_ms()
    taken = acc.drain([TP], take_all, now)
    assert [decode_batch(b.builder.build())[0].value for b in taken] == [b"a" * 80, b"b" * 80]
    acc.append(TP, 1000, None, b"d" * 80, (), max_block_ms=0)
    assert len(acc.drain([TP], take_all, now)) == 1, "c went, d lingers"
    acc.append(TP, 1000, None, b"e" * 80, (), max_block_ms=0)
    linger_over = monotonic_ms() + 60_000
    assert len(acc.drain([TP], take_all, linger_over)) == 2, "d and e, its linger over"
