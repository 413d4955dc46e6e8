"""Produce (key 0) through kio's codec against a real ReplicaManager: batches pass through to
the log, per-partition results carry Kafka's fields for every version, acks=0 answers nothing."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.api import RequestContext
from pykraft.broker.kafka.apis.produce import APIS
from pykraft.broker.partition import LeaderAppend, Partition
from pykraft.metadata_log.records import ConfigRecord, ConfigResourceType
from pykraft.proto.record_batch import build_batch

from ..replica_harness import Harness, record_values
from .data_path_calls import call, services
from .kio_wire import request_types

PRODUCE = APIS[0]


def _request(version: int, partitions: Mapping[int, bytes | None], *, acks: int = 1) -> Any:
    types = request_types(0, version)
    data = tuple(types.PartitionProduceData(index=p, records=r) for p, r in partitions.items())
    return types.ProduceRequest(
        acks=acks,
        timeout=datetime.timedelta(milliseconds=500),
        topic_data=(types.TopicProduceData(name="orders", partition_data=data),),
    )


def _batch(*values: bytes) -> bytes:
    return build_batch([(1_000 + i, None, v) for i, v in enumerate(values)])


@pytest.mark.parametrize("version", range(3, 10))
def test_batches_are_appended_and_answered_with_their_offsets(
    harness: Harness, tmp_path: Path, version: int
) -> None:
    kafka = services(harness.manager, tmp_path)
    call(PRODUCE, kafka, version, _request(version, {0: _batch(b"a", b"b")}))
    response = call(PRODUCE, kafka, version, _request(version, {0: _batch(b"c")}))
    (topic,) = response.responses
    assert topic.name == "orders"
    (result,) = topic.partition_responses
    assert (result.index, result.error_code, result.base_offset) == (0, ErrorCode.none, 2)
    assert result.log_append_time is None  # CreateTime topic: -1 on the wire
    if version >= 5:
        assert result.log_start_offset == 0
    if version >= 8:
        assert (result.record_errors, result.error_message) == ((), None)
    data = harness.fetch({0: 0})[0].records
    assert record_values(data) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_acks_all_waits_for_the_isr_and_acks_zero_answers_nothing(
    harness: Harness, tmp_path: Path
) -> None:
    kafka = services(harness.manager, tmp_path)
    assert call(PRODUCE, kafka, 9, _request(9, {0: _batch(b"x")}, acks=0)) is None
    response = call(PRODUCE, kafka, 9, _request(9, {0: _batch(b"y")}, acks=-1))
    (result,) = response.responses[0].partition_responses
    assert (result.error_code, result.base_offset) == (ErrorCode.none, 1)
    assert record_values(harness.fetch({0: 0})[0].records) == [(0, b"x"), (1, b"y")]


def test_the_log_gets_the_records_object_the_request_holds(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No copy between kio's request entity and the log (a protobuf request took two)."""
    appended: list[bytes] = []
    append = Partition.append_as_leader

    def spy(partition: Partition, batches: bytes, *, acks: int, now_ms: int) -> LeaderAppend:
        appended.append(batches)
        return append(partition, batches, acks=acks, now_ms=now_ms)

    monkeypatch.setattr(Partition, "append_as_leader", spy)
    request = _request(9, {0: _batch(b"a")}, acks=-1)
    context = RequestContext(services(harness.manager, tmp_path), 9, "test-client", "127.0.0.1")
    (result,) = PRODUCE.handle(context, request).responses[0].partition_responses
    assert (result.error_code, result.base_offset) == (ErrorCode.none, 0)
    (records,) = appended
    assert records is request.topic_data[0].partition_data[0].records


def test_errors_are_kafkas_codes_per_partition(harness: Harness, tmp_path: Path) -> None:
    kafka = services(harness.manager, tmp_path)
    corrupt = bytearray(_batch(b"z"))
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    two_batches = _batch(b"c") + _batch(b"d")
    partitions = {2: _batch(b"a"), 0: bytes(corrupt), 7: _batch(b"b"), 1: two_batches}
    request = _request(9, partitions)
    response = call(PRODUCE, kafka, 9, request)
    results = {r.index: r for r in response.responses[0].partition_responses}
    assert results[2].error_code == ErrorCode.not_leader_or_follower
    assert results[0].error_code == ErrorCode.corrupt_message
    assert results[7].error_code == ErrorCode.unknown_topic_or_partition
    assert results[1].error_code == ErrorCode.invalid_record
    for result in results.values():
        assert (result.base_offset, result.log_start_offset) == (-1, -1)
        assert result.error_message
    assert list(results) == [2, 0, 7, 1]  # in the request's order
    (null,) = call(PRODUCE, kafka, 9, _request(9, {1: None})).responses[0].partition_responses
    assert null.error_code == ErrorCode.invalid_record
    assert [r.records for r in harness.fetch({0: 0, 1: 0}).values()] == [b"", b""]


@pytest.mark.parametrize("version", [3, 9])
def test_log_append_time_topics_answer_the_brokers_time(
    harness: Harness, tmp_path: Path, version: int
) -> None:
    harness.change(
        ConfigRecord(ConfigResourceType.TOPIC, "orders", "message.timestamp.type", "LogAppendTime")
    )
    before = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=1)
    response = call(
        PRODUCE, services(harness.manager, tmp_path), version, _request(version, {0: _batch(b"a")})
    )
    (result,) = response.responses[0].partition_responses
    assert result.error_code == ErrorCode.none
    assert result.log_append_time is not None and result.log_append_time >= before
