"""The pipelining rules (client/producer/in_flight.py and the accumulator's retry order):
up to 5 batches of a partition in flight, retries one at a time oldest first, and which
OUT_OF_ORDER_SEQUENCE_NUMBER answers are explained by an earlier batch (Kafka's rules)."""

from __future__ import annotations

import threading

from pykraft.client.producer.accumulator import ProducerBatch, RecordAccumulator
from pykraft.client.producer.in_flight import InFlightBatches
from pykraft.client.producer.open_batches import OpenBatch
from pykraft.client.types import TopicPartition
from pykraft.proto.record_batch import Compression, decode_batch

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)
IN_FLIGHT_MAX = 5


def batch(tp: TopicPartition = TP) -> ProducerBatch:
    return ProducerBatch(tp, OpenBatch(tp, Compression.NONE), created_ms=0)


def sent(unresolved: InFlightBatches, count: int, tp: TopicPartition = TP) -> list[ProducerBatch]:
    batches = [batch(tp) for _ in range(count)]
    for b in batches:
        assert unresolved.may_send(b)
        unresolved.sent(b)
    return batches


def test_up_to_the_limit_of_new_batches_go_per_partition() -> None:
    unresolved = InFlightBatches(IN_FLIGHT_MAX)
    first, *_ = sent(unresolved, IN_FLIGHT_MAX)
    assert not unresolved.may_send(batch()), "a sixth batch waits"
    assert unresolved.may_send(batch(OTHER)), "other partitions have their own limit"
    unresolved.resolved(first)
    assert unresolved.may_send(batch())
    assert unresolved.unresolved_count(TP) == IN_FLIGHT_MAX - 1


def test_send_order_numbers_batches_at_their_first_send_only() -> None:
    unresolved = InFlightBatches(IN_FLIGHT_MAX)
    a, b = sent(unresolved, 2)
    assert 0 <= a.send_order < b.send_order
    order = a.send_order
    unresolved.sent(a)  # a retry
    assert a.send_order == order


def test_a_retry_goes_only_when_it_is_the_first_unresolved_batch() -> None:
    unresolved = InFlightBatches(IN_FLIGHT_MAX)
    a, b, c = sent(unresolved, 3)
    # b and c failed and wait to be retried while a is still in flight.
    assert not unresolved.may_send(b)
    assert not unresolved.may_send(c)
    unresolved.resolved(a)
    assert unresolved.may_send(b)
    assert not unresolved.may_send(c), "retries go one at a time"
    unresolved.sent(b)
    assert not unresolved.may_send(c)
    unresolved.resolved(b)
    assert unresolved.may_send(c)


def test_out_of_order_is_expected_only_behind_an_unresolved_batch() -> None:
    unresolved = InFlightBatches(IN_FLIGHT_MAX)
    a, b = sent(unresolved, 2)
    assert not unresolved.sent_behind(a), "nothing before a: the broker lost a sequence"
    assert unresolved.sent_behind(b), "a may have failed or been overtaken"
    unresolved.resolved(a)
    unresolved.sent(b)  # b's retry goes first in line: a refusal now is real
    assert not unresolved.sent_behind(b)
    unresolved.resolved(b)
    assert unresolved.unresolved_count(TP) == 0


def test_one_batch_per_partition_without_idempotence() -> None:
    unresolved = InFlightBatches(1)
    (a,) = sent(unresolved, 1)
    assert not unresolved.may_send(batch())
    unresolved.resolved(a)
    assert unresolved.may_send(batch())


def test_retries_wait_in_their_queue_in_send_order_ahead_of_new_batches() -> None:
    """Answers of pipelined requests come back in any order: the third batch's failure may be
    handled before the second's, yet the second goes again first (Kafka's
    insertInSequenceOrder), and both before the batch that was never sent."""
    acc = RecordAccumulator(
        batch_size=1, linger_ms=0, buffer_memory=1 << 20, compression=Compression.NONE,
        wakeup=threading.Event(),
    )  # fmt: skip
    unresolved = InFlightBatches(IN_FLIGHT_MAX)
    for value in (b"a", b"b", b"c", b"d"):
        acc.append(TP, 0, None, value, (), max_block_ms=0)
    a, b, c = acc.drain([TP], lambda _, taken: taken < 3, 0)
    for sent_batch in (a, b, c):
        unresolved.sent(sent_batch)
    acc.reenqueue(c, now_ms=0, backoff_ms=0)
    acc.reenqueue(b, now_ms=0, backoff_ms=0)
    unresolved.resolved(a)
    order = []
    while drained := acc.drain([TP], unresolved.may_send, 0):
        (next_batch,) = drained
        order.append(next_batch)
        unresolved.sent(next_batch)
        unresolved.resolved(next_batch)
    assert order[:2] == [b, c]
    assert [r.value for r in decode_batch(order[2].builder.build())] == [b"d"]


def test_new_batches_taken_into_one_request_count_against_the_limit() -> None:
    unresolved = InFlightBatches(IN_FLIGHT_MAX)
    sent(unresolved, 2)
    assert unresolved.may_send(batch(), taken=2)
    assert not unresolved.may_send(batch(), taken=3), "2 in flight and 3 taken fill the 5"


def test_a_retry_goes_alone_in_its_request() -> None:
    unresolved = InFlightBatches(IN_FLIGHT_MAX)
    (retry,) = sent(unresolved, 1)
    assert unresolved.may_send(retry)
    assert not unresolved.may_send(retry, taken=1), "never behind other batches"


def test_a_drain_takes_a_partitions_batches_together_but_a_retry_alone() -> None:
    acc = RecordAccumulator(
        batch_size=1, linger_ms=0, buffer_memory=1 << 20, compression=Compression.NONE,
        wakeup=threading.Event(),
    )  # fmt: skip
    unresolved = InFlightBatches(IN_FLIGHT_MAX)
    for value in (b"a", b"b", b"c"):
        acc.append(TP, 0, None, value, (), max_block_ms=0)
    a, b, c = acc.drain([TP], unresolved.may_send, 0)
    for sent_batch in (a, b, c):
        unresolved.sent(sent_batch)
    acc.append(TP, 0, None, b"d", (), max_block_ms=0)
    acc.reenqueue(a, now_ms=0, backoff_ms=0)
    assert acc.drain([TP], unresolved.may_send, 0) == [a], "the retry goes alone"
    unresolved.resolved(a)
    assert len(acc.drain([TP], unresolved.may_send, 0)) == 1, "then the batch behind it"


def test_batches_answered_before_an_earlier_one_still_count_until_it_resolves() -> None:
    """The broker remembers a producer's last 5 batches of a partition to recognise a retry.
    Answers may come back out of order (a lost answer, the broker's thread pool): were the
    batches after an unanswered one taken off the limit, 5 more could be written before its
    retry, which would then be refused OUT_OF_ORDER_SEQUENCE_NUMBER instead of recognised.
    So the limit counts every batch sent since the oldest unresolved one (Kafka's answers come
    back in order on a connection, which keeps the same bound)."""
    unresolved = InFlightBatches(IN_FLIGHT_MAX)
    first, *later = sent(unresolved, 3)
    for answered in later:
        unresolved.resolved(answered)
    assert unresolved.may_send(batch(), taken=1)
    assert not unresolved.may_send(batch(), taken=2), "3 sent since the first, 2 taken: 5"
    assert unresolved.may_send(first), "its retry goes"
    unresolved.resolved(first)
    assert unresolved.may_send(batch(), taken=IN_FLIGHT_MAX - 1)
    assert unresolved.unresolved_count(TP) == 0
