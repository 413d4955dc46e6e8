from __future__ import annotations

from uuid import UUID

import pytest

from pykraft.metadata_log.configs import validate_config
from pykraft.metadata_log.errors import ConfigValidationError
from pykraft.metadata_log.image import MetadataImage, PartitionRegistration
from pykraft.metadata_log.records import (
    ConfigRecord,
    ConfigResourceType,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from pykraft.proto import admin_pb2, common_pb2
from pykraft.quorum.controller import RECORDS_PER_OPERATION_MAX, create_topics
from pykraft.quorum.controller.topics import create_partitions, delete_topics
from tests.unit.quorum.controller.conftest import (
    after,
    broker,
    brokers,
    cluster_config,
    image_with,
    topic,
    topic_ids,
)

TOPIC_ID = UUID(int=500)


def creatable(
    name: str, partitions: int = 1, replication_factor: int = 1, **configs: str
) -> admin_pb2.CreatableTopic:
    return admin_pb2.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        configs={key.replace("_", "."): value for key, value in configs.items()},
    )


def create(
    image: MetadataImage, *topics: admin_pb2.CreatableTopic, validate_only: bool = False
) -> tuple[admin_pb2.CreateTopicsResponse, MetadataImage, int]:
    request = admin_pb2.CreateTopicsRequest(topics=topics, validate_only=validate_only)
    result = create_topics(image, request, new_topic_id=topic_ids())
    return result.response, after(image, result), len(result.records)


THREE_BROKERS = image_with(*brokers(1, 2, 3))


def test_create_topic_writes_topic_configs_and_partitions_in_sync_with_first_replica_leading() -> (
    None
):
    request = admin_pb2.CreateTopicsRequest(
        topics=[creatable("orders", 3, 2, retention_ms=" 1000 ")]
    )
    result = create_topics(THREE_BROKERS, request, new_topic_id=topic_ids(7))

    (item,) = result.response.topics
    assert (item.error_code, item.num_partitions, item.replication_factor) == (0, 3, 2)
    assert item.topic_id == str(UUID(int=7))
    assert result.records[0] == TopicRecord("orders", UUID(int=7))
    assert result.records[1] == ConfigRecord(
        ConfigResourceType.TOPIC, "orders", "retention.ms", "1000"
    )
    partitions = [r for r in result.records if isinstance(r, PartitionRecord)]
    assert [p.partition_id for p in partitions] == [0, 1, 2]
    for partition in partitions:
        assert partition.isr == partition.replicas and partition.leader == partition.replicas[0]
        assert (partition.leader_epoch, partition.partition_epoch) == (0, 0)

    image = after(THREE_BROKERS, result)
    created = image.topics.get_by_name("orders")
    assert created is not None and len(created.partitions) == 3
    assert image.configs.get(ConfigResourceType.TOPIC, "orders") == {"retention.ms": "1000"}


def test_defaults_come_from_the_cluster_wide_broker_config_else_kafkas() -> None:
    response, _, _ = create(THREE_BROKERS, creatable("t", -1, -1))
    assert (response.topics[0].num_partitions, response.topics[0].replication_factor) == (1, 1)

    configured = image_with(
        cluster_config("num.partitions", "4"),
        cluster_config("default.replication.factor", "3"),
        base=THREE_BROKERS,
    )
    response, image, _ = create(configured, creatable("t", -1, -1))
    assert (response.topics[0].num_partitions, response.topics[0].replication_factor) == (4, 3)
    created = image.topics.get_by_name("t")
    assert created is not None
    assert all(len(p.replicas) == 3 for p in created.partitions.values())


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "has space", "é", "a/b"])
def test_bad_topic_name_fails_alone(name: str) -> None:
    response, image, _ = create(THREE_BROKERS, creatable(name), creatable("fine"))
    bad, fine = response.topics
    assert bad.error_code == common_pb2.INVALID_TOPIC_EXCEPTION and bad.error_message
    assert fine.error_code == common_pb2.NONE
    assert list(image.topics.by_name) == ["fine"]


def test_longest_legal_name_is_accepted() -> None:
    response, _, _ = create(THREE_BROKERS, creatable("a-Z_9." + "x" * 243))
    assert response.topics[0].error_code == common_pb2.NONE


def test_duplicate_name_in_one_request_fails_every_occurrence() -> None:
    response, image, records = create(THREE_BROKERS, creatable("t"), creatable("t", 2))
    assert [t.error_code for t in response.topics] == [common_pb2.INVALID_REQUEST] * 2
    assert records == 0 and image.topics.get_by_name("t") is None


def test_existing_topic_and_dot_underscore_collision_are_refused() -> None:
    image = image_with(*topic("a.b", TOPIC_ID, [(1,)]), base=THREE_BROKERS)
    response, _, records = create(image, creatable("a.b"), creatable("a_b"))
    assert [t.error_code for t in response.topics] == [
        common_pb2.TOPIC_ALREADY_EXISTS,
        common_pb2.INVALID_TOPIC_EXCEPTION,
    ]
    assert records == 0


def test_collision_within_one_request_is_refused() -> None:
    response, image, _ = create(THREE_BROKERS, creatable("x_y"), creatable("x.y"))
    assert [t.error_code for t in response.topics] == [0, common_pb2.INVALID_TOPIC_EXCEPTION]
    assert list(image.topics.by_name) == ["x_y"]


def test_replication_factor_above_unfenced_brokers_names_both_numbers() -> None:
    image = image_with(broker(4, fenced=True), base=THREE_BROKERS)
    response, _, records = create(image, creatable("t", 1, 4))
    (item,) = response.topics
    assert item.error_code == common_pb2.INVALID_REPLICATION_FACTOR
    assert "4" in item.error_message and "3" in item.error_message
    assert records == 0


@pytest.mark.parametrize(
    ("partitions", "replication_factor", "code"),
    [
        (0, 1, common_pb2.INVALID_PARTITIONS),
        (-2, 1, common_pb2.INVALID_PARTITIONS),
        (1, 0, common_pb2.INVALID_REPLICATION_FACTOR),
        (1, -5, common_pb2.INVALID_REPLICATION_FACTOR),
    ],
)
def test_non_positive_counts_are_refused(
    partitions: int, replication_factor: int, code: int
) -> None:
    response, _, records = create(THREE_BROKERS, creatable("t", partitions, replication_factor))
    assert response.topics[0].error_code == code and records == 0


def test_unknown_config_key_and_bad_value_are_invalid_config_with_the_validators_sentence() -> None:
    response, image, records = create(
        THREE_BROKERS,
        creatable("unknown", no_such_key="1"),
        creatable("bad", retention_ms="soon"),
    )
    unknown, bad = response.topics
    assert unknown.error_code == bad.error_code == common_pb2.INVALID_CONFIG
    with pytest.raises(ConfigValidationError) as expected:
        validate_config(ConfigResourceType.TOPIC, "retention.ms", "soon")
    assert bad.error_message == str(expected.value)
    assert records == 0 and not image.topics.by_name


def test_validate_only_reports_the_outcome_and_writes_nothing() -> None:
    response, _, records = create(
        THREE_BROKERS, creatable("ok", 2, 3), creatable("bad", 1, 9), validate_only=True
    )
    ok, bad = response.topics
    assert (ok.error_code, ok.num_partitions, ok.replication_factor, ok.topic_id) == (0, 2, 3, "")
    assert bad.error_code == common_pb2.INVALID_REPLICATION_FACTOR
    assert records == 0


def test_a_request_over_the_record_limit_fails_whole_with_policy_violation() -> None:
    response, _, records = create(
        THREE_BROKERS, creatable("small"), creatable("huge", RECORDS_PER_OPERATION_MAX)
    )
    assert response.header.error_code == common_pb2.POLICY_VIOLATION
    assert str(RECORDS_PER_OPERATION_MAX) in response.header.error_message
    assert [t.error_code for t in response.topics] == [common_pb2.POLICY_VIOLATION] * 2
    assert records == 0


def test_fenced_and_shutting_down_brokers_get_no_replicas() -> None:
    image = image_with(
        broker(4, fenced=True), broker(5, in_controlled_shutdown=True), base=THREE_BROKERS
    )
    _, created, _ = create(image, creatable("t", 12, 3))
    placed = {r for p in created.topics.by_id[UUID(int=1)].partitions.values() for r in p.replicas}
    assert placed == {1, 2, 3}


def test_delete_topics_removes_topic_and_its_configs_and_reports_missing_names() -> None:
    image = image_with(*topic("t", TOPIC_ID, [(1,)], {"retention.ms": "5"}), base=THREE_BROKERS)
    result = delete_topics(image, admin_pb2.DeleteTopicsRequest(names=["t", "missing"]))
    deleted, missing = result.response.topics
    assert (deleted.error_code, deleted.topic_id) == (0, str(TOPIC_ID))
    assert missing.error_code == common_pb2.UNKNOWN_TOPIC_OR_PARTITION
    assert result.records == (RemoveTopicRecord(TOPIC_ID),)
    gone = after(image, result)
    assert gone.topics.get_by_name("t") is None
    assert not gone.configs.get(ConfigResourceType.TOPIC, "t")


def test_delete_of_a_name_given_twice_fails_both() -> None:
    image = image_with(*topic("t", TOPIC_ID, [(1,)]), base=THREE_BROKERS)
    result = delete_topics(image, admin_pb2.DeleteTopicsRequest(names=["t", "t"]))
    assert [t.error_code for t in result.response.topics] == [common_pb2.INVALID_REQUEST] * 2
    assert result.records == ()


def grow(image: MetadataImage, name: str, count: int) -> admin_pb2.CreatePartitionsResponse:
    request = admin_pb2.CreatePartitionsRequest(
        topics=[admin_pb2.PartitionCount(name=name, count=count)]
    )
    return create_partitions(image, request).response


def test_create_partitions_adds_partitions_with_the_replication_factor_of_partition_0() -> None:
    image = image_with(*topic("t", TOPIC_ID, [(1, 2), (2, 3)]), base=THREE_BROKERS)
    request = admin_pb2.CreatePartitionsRequest(
        topics=[admin_pb2.PartitionCount(name="t", count=5)]
    )
    result = create_partitions(image, request)
    assert result.response.topics[0].error_code == common_pb2.NONE
    grown = after(image, result).topics.by_id[TOPIC_ID]
    assert sorted(grown.partitions) == [0, 1, 2, 3, 4]
    for partition_id in (2, 3, 4):
        partition = grown.partitions[partition_id]
        assert len(partition.replicas) == 2 and partition.isr == partition.replicas
        assert partition.leader == partition.replicas[0]


@pytest.mark.parametrize("count", [1, 2])
def test_create_partitions_cannot_shrink_or_stay(count: int) -> None:
    image = image_with(*topic("t", TOPIC_ID, [(1,), (2,)]), base=THREE_BROKERS)
    item = grow(image, "t", count).topics[0]
    assert item.error_code == common_pb2.INVALID_PARTITIONS and "2" in item.error_message


def test_create_partitions_of_a_missing_topic_or_with_too_few_brokers_fails() -> None:
    leaderless = PartitionRegistration((1, 2, 3), (1,), 1, 0, 0)
    image = image_with(
        *topic("t", TOPIC_ID, [leaderless]), broker(3, fenced=True), base=THREE_BROKERS
    )
    assert grow(image, "nope", 3).topics[0].error_code == common_pb2.UNKNOWN_TOPIC_OR_PARTITION
    assert grow(image, "t", 2).topics[0].error_code == common_pb2.INVALID_REPLICATION_FACTOR


def test_growing_past_the_record_limit_fails_whole_with_policy_violation() -> None:
    image = image_with(*topic("t", TOPIC_ID, [(1,)]), base=THREE_BROKERS)
    response = grow(image, "t", RECORDS_PER_OPERATION_MAX + 2)
    assert response.header.error_code == common_pb2.POLICY_VIOLATION
    assert response.topics[0].error_code == common_pb2.POLICY_VIOLATION
