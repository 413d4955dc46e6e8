from __future__ import annotations

from uuid import UUID

from pykraft.metadata_log.configs import TOPIC_CONFIGS
from pykraft.metadata_log.image import PartitionRegistration
from pykraft.metadata_log.records import ProducerIdsRecord
from pykraft.proto import admin_pb2, common_pb2, controller_pb2
from pykraft.quorum.controller import (
    PRODUCER_ID_BLOCK_SIZE,
    allocate_producer_ids,
    describe_topics,
)
from tests.unit.quorum.controller.conftest import (
    after,
    broker_epoch,
    brokers,
    image_with,
    topic,
)

IMAGE = image_with(
    *brokers(1, 2),
    *topic("zeta", UUID(int=2), [(2,)]),
    *topic(
        "alpha",
        UUID(int=1),
        [(1, 2), PartitionRegistration((2, 1), (2,), 2, 3, 5)],
        {"retention.ms": "10"},
    ),
)


def test_producer_id_blocks_follow_each_other() -> None:
    request = controller_pb2.AllocateProducerIdsRequest(broker_id=1, broker_epoch=broker_epoch(1))
    first = allocate_producer_ids(IMAGE, request)
    assert (first.response.producer_id_start, first.response.producer_id_len) == (
        0,
        PRODUCER_ID_BLOCK_SIZE,
    )
    assert first.records == (ProducerIdsRecord(1, broker_epoch(1), PRODUCER_ID_BLOCK_SIZE),)
    second = allocate_producer_ids(after(IMAGE, first), request)
    assert second.response.producer_id_start == PRODUCER_ID_BLOCK_SIZE


def test_producer_ids_need_a_current_broker_epoch() -> None:
    for broker_id, epoch, code in (
        (1, broker_epoch(1) + 1, common_pb2.STALE_BROKER_EPOCH),
        (5, 0, common_pb2.BROKER_ID_NOT_REGISTERED),
    ):
        request = controller_pb2.AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=epoch)
        result = allocate_producer_ids(IMAGE, request)
        assert result.response.header.error_code == code and result.records == ()


def test_describe_all_topics_sorted_with_their_partitions() -> None:
    response = describe_topics(IMAGE, admin_pb2.DescribeTopicsRequest())
    assert [t.name for t in response.topics] == ["alpha", "zeta"]
    alpha = response.topics[0]
    assert alpha.topic_id == str(UUID(int=1)) and not alpha.configs
    second = alpha.partitions[1]
    assert (second.partition, second.leader, second.leader_epoch, second.partition_epoch) == (
        1,
        2,
        3,
        5,
    )
    assert (list(second.replicas), list(second.isr)) == ([2, 1], [2])


def test_describe_named_topics_reports_missing_ones_and_effective_configs() -> None:
    request = admin_pb2.DescribeTopicsRequest(names=["missing", "alpha"], include_configs=True)
    missing, alpha = describe_topics(IMAGE, request).topics
    assert missing.error_code == common_pb2.UNKNOWN_TOPIC_OR_PARTITION
    assert alpha.error_code == common_pb2.NONE
    configs = {entry.name: entry for entry in alpha.configs}
    assert list(configs) == sorted(TOPIC_CONFIGS)
    assert configs["retention.ms"].value == "10"
    assert configs["retention.ms"].source == admin_pb2.CONFIG_SOURCE_DYNAMIC_TOPIC
    assert configs["segment.ms"].source == admin_pb2.CONFIG_SOURCE_DEFAULT
