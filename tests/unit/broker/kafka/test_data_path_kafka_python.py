"""The data-path handlers against a codec no one here wrote: kafka-python's (built from
Kafka's JSON message schemas at run time) encodes the requests and decodes the answers, at the
versions kafka-python sends (2.0.x's fixed Produce v7, Fetch v4, ListOffsets v1; 3.x's
negotiated maxima), and kafka-python's record parser reads the fetched batches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer.fetch import FetchResponse
from kafka.protocol.consumer.offsets import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.producer.produce import (
    ProduceRequest,
    ProduceResponse,
)
from kafka.protocol.producer.transaction import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)

from pykraft.broker.kafka.api import Api, KafkaServices
from pykraft.broker.kafka.apis import (
    fetch,
    init_producer_id,
    list_offsets,
    offset_for_leader_epoch,
    produce,
)
from pykraft.proto.record_batch import build_batch

from ..replica_harness import Harness
from .data_path_calls import context, services
from .kafka_python_wire import exchange, fetch_request, record_values


def _exchange(api: Api, kafka: KafkaServices, request: Any, response_type: Any) -> Any:
    return exchange(api, context(kafka, request.API_VERSION), request, response_type)


@pytest.mark.parametrize(("produce_version", "fetch_version"), [(7, 4), (8, 10), (9, 12)])
def test_produce_then_fetch(
    harness: Harness, tmp_path: Path, produce_version: int, fetch_version: int
) -> None:
    kafka = services(harness.manager, tmp_path)
    batch = build_batch([(1_000, None, b"a"), (1_001, None, b"b")])
    data = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)
    request = ProduceRequest(
        version=produce_version,
        transactional_id=None,
        acks=-1,
        timeout_ms=1_000,
        topic_data=[ProduceRequest.TopicProduceData(name="orders", partition_data=[data])],
    )
    produced = _exchange(produce.APIS[0], kafka, request, ProduceResponse)
    (result,) = produced.responses[0].partition_responses
    assert (result.index, result.error_code, result.base_offset) == (0, 0, 0)
    assert result.log_append_time_ms == -1
    fetched = _exchange(fetch.APIS[0], kafka, fetch_request(fetch_version), FetchResponse)
    (partition,) = fetched.responses[0].partitions
    assert (partition.error_code, partition.high_watermark) == (0, 2)
    assert record_values(partition.records) == [(0, b"a"), (1, b"b")]


@pytest.mark.parametrize("version", [1, 5])
def test_list_offsets(harness: Harness, tmp_path: Path, version: int) -> None:
    harness.produce(0, [b"a", b"b"])
    item = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1)
    request = ListOffsetsRequest(
        version=version,
        replica_id=-1,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name="orders", partitions=[item])],
    )
    response = _exchange(
        list_offsets.APIS[0], services(harness.manager, tmp_path), request, ListOffsetsResponse
    )
    (result,) = response.topics[0].partitions
    assert (result.error_code, result.offset) == (0, 2)


def test_init_producer_id_and_offset_for_leader_epoch(harness: Harness, tmp_path: Path) -> None:
    kafka = services(harness.manager, tmp_path)
    request = InitProducerIdRequest(version=1, transactional_id=None, transaction_timeout_ms=1)
    ids = _exchange(init_producer_id.APIS[0], kafka, request, InitProducerIdResponse)
    assert (ids.error_code, ids.producer_id, ids.producer_epoch) == (0, 1000, 0)
    harness.produce(0, [b"a"])
    item = OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
        partition=0, current_leader_epoch=0, leader_epoch=0
    )
    request = OffsetForLeaderEpochRequest(
        version=3,
        replica_id=-1,
        topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic="orders", partitions=[item])
        ],
    )
    response = _exchange(
        offset_for_leader_epoch.APIS[0], kafka, request, OffsetForLeaderEpochResponse
    )
    (result,) = response.topics[0].partitions
    assert (result.error_code, result.leader_epoch, result.end_offset) == (0, 0, 1)
