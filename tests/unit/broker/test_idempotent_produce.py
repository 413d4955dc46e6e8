"""Idempotent produce through the request handler, against real PartitionLogs in tmp_path: a retry
is answered with the original offsets (acks=1 and acks=all, where it waits for the original to
be replicated), refused sequences come back as partition errors, and the test hook that drops
responses processes the request first."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import cast

import grpc
import pytest

from pykraft.broker.controller_channel import monotonic_ms
from pykraft.broker.group.handlers import GroupHandlers
from pykraft.broker.produce import handle_produce
from pykraft.broker.producer_ids import ProducerIdAllocator
from pykraft.broker.service import DROPPED_RESPONSE_MESSAGE, BrokerService, ProduceResponseDropper
from pykraft.proto import broker_pb2, common_pb2
from pykraft.proto.record_batch import build_batch

from .replica_harness import Harness, broker_config, record_values, wall_clock_ms
from .test_producer_ids import FakeContext, FakeController, _Aborted

DEADLINE_S = 10.0


def produce_request(
    partition: int,
    sequence: int,
    values: list[bytes],
    *,
    producer_id: int = 5,
    acks: int = 1,
    timeout_ms: int = 200,
) -> broker_pb2.ProduceRequest:
    batch = build_batch(
        [(1_000, None, value) for value in values],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
    )
    request = broker_pb2.ProduceRequest(acks=acks, timeout_ms=timeout_ms)
    request.topics.add(topic="orders").partitions.add(partition=partition, records=batch)
    return request


def send(harness: Harness, request: broker_pb2.ProduceRequest) -> broker_pb2.ProducePartitionResult:
    answer = handle_produce(harness.manager, request, monotonic_ms, wall_clock_ms=wall_clock_ms)
    return answer.topics[0].partitions[0]


def storedrecord_values(harness: Harness, partition: int) -> list[tuple[int, bytes | None]]:
    partition_ = harness.manager.partition("orders", partition)
    assert partition_ is not None
    return record_values(partition_.log.read(0, bytes_max=1 << 20).data)


def test_a_retry_is_answered_with_the_original_offset(harness: Harness) -> None:
    assert send(harness, produce_request(0, 0, [b"a", b"b"])).base_offset == 0
    assert send(harness, produce_request(0, 2, [b"c"])).base_offset == 2
    again = send(harness, produce_request(0, 2, [b"c"]))
    assert (again.error_code, again.base_offset) == (common_pb2.NONE, 2)
    assert storedrecord_values(harness, 0) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_a_refused_sequence_is_a_partition_error(harness: Harness) -> None:
    send(harness, produce_request(0, 0, [b"a"]))
    result = send(harness, produce_request(0, 4, [b"b"]))
    assert result.error_code == common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert "sent sequence 4, expected 1" in result.error_message
    assert result.base_offset == -1
    unknown = send(harness, produce_request(0, 3, [b"c"], producer_id=6))
    assert unknown.error_code == common_pb2.UNKNOWN_PRODUCER_ID
    assert storedrecord_values(harness, 0) == [(0, b"a")]


def test_an_acks_all_retry_waits_until_the_original_is_replicated(harness: Harness) -> None:
    partition = harness.manager.partition("orders", 1)  # ISR 1 and 2
    assert partition is not None
    first = send(harness, produce_request(1, 0, [b"x", b"y"], acks=-1, timeout_ms=50))
    assert first.error_code == common_pb2.REQUEST_TIMED_OUT  # written, not replicated
    assert partition.log.log_end_offset == 2 and partition.log.high_watermark == 0

    results: list[broker_pb2.ProducePartitionResult] = []
    retry = produce_request(1, 0, [b"x", b"y"], acks=-1, timeout_ms=int(DEADLINE_S * 1000))
    version = harness.manager.version
    producer = threading.Thread(target=lambda: results.append(send(harness, retry)))
    producer.start()
    with harness.manager.changed:  # the duplicate's append signals it too
        assert harness.manager.changed.wait_for(lambda: harness.manager.version > version, 5)
    assert partition.log.log_end_offset == 2, "nothing written for the retry"
    assert producer.is_alive(), "the retry waits for the original's replication"
    harness.fetch({1: 2}, replica_id=2)  # follower 2 now holds offsets 0 and 1
    producer.join(DEADLINE_S)
    (result,) = results
    assert (result.error_code, result.base_offset) == (common_pb2.NONE, 0)


def test_an_acks_all_retry_of_a_replicated_batch_is_answered_at_once(harness: Harness) -> None:
    assert send(harness, produce_request(0, 0, [b"x"], acks=-1)).error_code == common_pb2.NONE
    again = send(harness, produce_request(0, 0, [b"x"], acks=-1, timeout_ms=0))
    assert (again.error_code, again.base_offset) == (common_pb2.NONE, 0)


# --- the test hook: test.drop.produce.responses.every ---


def test_the_dropper_counts_only_requests_with_idempotent_batches() -> None:
    dropper = ProduceResponseDropper(2)
    plain = broker_pb2.ProduceRequest(acks=1)
    plain.topics.add(topic="t").partitions.add(partition=0, records=build_batch([(1, None, b"")]))
    idempotent = produce_request(0, 0, [b"a"])
    decisions = [dropper.should_drop(request) for request in (plain, idempotent, plain, idempotent)]
    assert decisions == [False, False, False, True]
    assert not ProduceResponseDropper(0).should_drop(idempotent)


def test_a_dropped_response_was_processed_and_its_retry_is_deduplicated(
    harness: Harness, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = broker_config(tmp_path / "a", test_drop_produce_responses_every=2)
    ids = ProducerIdAllocator(
        FakeController(),
        broker_id=1,
        broker_epoch=lambda: 1,
        request_timeout_ms=1000,
        clock_ms=monotonic_ms,
    )
    service = BrokerService(
        harness.manager,
        config,
        monotonic_ms,
        wall_clock_ms=wall_clock_ms,
        producer_ids=ids,
        may_serve=lambda now_ms: True,
        groups=cast(GroupHandlers, object()),  # no group calls in this test
    )

    def call(request: broker_pb2.ProduceRequest, context: FakeContext) -> int:
        response = service.Produce(request, cast(grpc.ServicerContext, context))
        return response.topics[0].partitions[0].base_offset

    assert call(produce_request(0, 0, [b"a"]), FakeContext()) == 0
    dropped = FakeContext()
    with pytest.raises(_Aborted):
        call(produce_request(0, 1, [b"b"]), dropped)
    assert dropped.aborted == (grpc.StatusCode.UNAVAILABLE, DROPPED_RESPONSE_MESSAGE)
    assert sum(DROPPED_RESPONSE_MESSAGE in r.getMessage() for r in caplog.records) == 1
    assert storedrecord_values(harness, 0) == [(0, b"a"), (1, b"b")], "appended before dropping"
    assert call(produce_request(0, 1, [b"b"]), FakeContext()) == 1, "the retry: a duplicate"
    assert storedrecord_values(harness, 0) == [(0, b"a"), (1, b"b")]
