"""CreateTopics, DeleteTopics and CreatePartitions over Kafka's protocol, through kio's codec."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.apis.topics import APIS, ASSIGNMENTS_REFUSED
from pykraft.proto import admin_pb2, common_pb2
from tests.unit.broker.kafka.admin_wire import TIMEOUT, FakeAdmin, context
from tests.unit.broker.kafka.kio_wire import request_types, through_the_wire

CREATE, DELETE, PARTITIONS = APIS


def created_answer(request: admin_pb2.CreateTopicsRequest) -> admin_pb2.CreateTopicsResponse:
    answer = admin_pb2.CreateTopicsResponse()
    for topic in request.topics:
        answer.topics.add(name=topic.name, topic_id="id", num_partitions=3, replication_factor=2)
    return answer


def _described(request: admin_pb2.DescribeConfigsRequest) -> admin_pb2.DescribeConfigsResponse:
    answer = admin_pb2.DescribeConfigsResponse()
    for resource in request.resources:
        result = answer.results.add(type=resource.type, name=resource.name)
        result.entries.add(
            name="retention.ms", value="1000", source=admin_pb2.CONFIG_SOURCE_DYNAMIC_TOPIC
        )
    return answer


def _create_request(version: int, *topics: Any, validate_only: bool = False) -> Any:
    module = request_types(CREATE.key, version)
    return module.CreateTopicsRequest(topics=topics, timeout=TIMEOUT, validate_only=validate_only)


def _topic(version: int, name: str, *, assignments: tuple[Any, ...] = ()) -> Any:
    module = request_types(CREATE.key, version)
    configs = (module.CreatableTopicConfig(name="retention.ms", value="1000"),)
    return module.CreatableTopic(
        name=name,
        num_partitions=-1,
        replication_factor=-1,
        assignments=assignments,
        configs=configs,
    )


@pytest.mark.parametrize("version", range(CREATE.version_min, CREATE.version_max + 1))
def test_create_topics_forwards_defaults_and_configs(version: int) -> None:
    admin = FakeAdmin(CreateTopics=created_answer, DescribeConfigs=_described)
    response = through_the_wire(
        CREATE, context(version, admin), _create_request(version, _topic(version, "t"))
    )
    (result,) = response.topics
    assert (result.name, result.error_code, result.error_message) == ("t", ErrorCode.none, None)
    method, forwarded = admin.calls[0]
    assert method == "CreateTopics"
    assert forwarded.timeout_ms == 5000
    assert (forwarded.topics[0].num_partitions, forwarded.topics[0].replication_factor) == (-1, -1)
    assert dict(forwarded.topics[0].configs) == {"retention.ms": "1000"}
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (3, 2)
        assert [(c.name, c.value, c.config_source) for c in result.configs] == [
            ("retention.ms", "1000", admin_pb2.CONFIG_SOURCE_DYNAMIC_TOPIC)
        ]
    else:
        assert len(admin.calls) == 1


def test_create_topics_validate_only_v5_returns_the_requested_configs() -> None:
    admin = FakeAdmin(CreateTopics=created_answer)
    request = _create_request(5, _topic(5, "t"), validate_only=True)
    (result,) = through_the_wire(CREATE, context(5, admin), request).topics
    assert admin.calls[0][1].validate_only
    assert [(c.name, c.value) for c in result.configs] == [("retention.ms", "1000")]


def test_create_topics_refuses_manual_assignments_and_keeps_the_order() -> None:
    admin = FakeAdmin(CreateTopics=created_answer, DescribeConfigs=_described)
    module = request_types(CREATE.key, 5)
    placed = (module.CreatableReplicaAssignment(partition_index=0, broker_ids=(1,)),)
    request = _create_request(5, _topic(5, "manual", assignments=placed), _topic(5, "auto"))
    response = through_the_wire(CREATE, context(5, admin), request)
    assert [(r.name, r.error_code) for r in response.topics] == [
        ("manual", ErrorCode.invalid_request),
        ("auto", ErrorCode.none),
    ]
    assert response.topics[0].error_message == ASSIGNMENTS_REFUSED
    assert response.topics[0].configs is None
    assert [t.name for t in admin.calls[0][1].topics] == ["auto"]


def _already_exists(request: admin_pb2.CreateTopicsRequest) -> admin_pb2.CreateTopicsResponse:
    answer = admin_pb2.CreateTopicsResponse()
    answer.topics.add(
        name="t", error_code=common_pb2.TOPIC_ALREADY_EXISTS, error_message="Topic 't' exists."
    )
    return answer


def test_create_topics_translates_the_controllers_error() -> None:
    admin = FakeAdmin(CreateTopics=_already_exists)
    response = through_the_wire(CREATE, context(5, admin), _create_request(5, _topic(5, "t")))
    (result,) = response.topics
    assert (result.error_code, result.error_message) == (
        ErrorCode.topic_already_exists,
        "Topic 't' exists.",
    )
    assert (result.num_partitions, result.configs) == (-1, None)
    assert len(admin.calls) == 1


def _no_controller(request: Any) -> Any:
    answer = admin_pb2.CreateTopicsResponse()
    answer.header.error_code = common_pb2.NOT_CONTROLLER
    answer.header.error_message = "no active controller"
    return answer


def test_a_request_refused_whole_gives_each_topic_the_error() -> None:
    admin = FakeAdmin(CreateTopics=_no_controller)
    request = _create_request(2, _topic(2, "a"), _topic(2, "b"))
    response = through_the_wire(CREATE, context(2, admin), request)
    assert [(r.name, r.error_code, r.error_message) for r in response.topics] == [
        ("a", ErrorCode.not_controller, "no active controller"),
        ("b", ErrorCode.not_controller, "no active controller"),
    ]


def deleted_answer(request: admin_pb2.DeleteTopicsRequest) -> admin_pb2.DeleteTopicsResponse:
    answer = admin_pb2.DeleteTopicsResponse()
    for name in request.names:
        code = common_pb2.NONE if name == "t" else common_pb2.UNKNOWN_TOPIC_OR_PARTITION
        answer.topics.add(name=name, error_code=code, error_message="gone?")
    return answer


@pytest.mark.parametrize("version", range(DELETE.version_min, DELETE.version_max + 1))
def test_delete_topics_by_name_with_the_controllers_errors(version: int) -> None:
    admin = FakeAdmin(DeleteTopics=deleted_answer)
    module = request_types(DELETE.key, version)
    request = module.DeleteTopicsRequest(topic_names=("t", "missing"), timeout=TIMEOUT)
    response = through_the_wire(DELETE, context(version, admin), request)
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("t", ErrorCode.none),
        ("missing", ErrorCode.unknown_topic_or_partition),
    ]
    assert list(admin.calls[0][1].names) == ["t", "missing"]


def grown_answer(request: admin_pb2.CreatePartitionsRequest) -> admin_pb2.CreatePartitionsResponse:
    answer = admin_pb2.CreatePartitionsResponse()
    for topic in request.topics:
        if topic.count < 2:
            answer.topics.add(
                name=topic.name,
                error_code=common_pb2.INVALID_PARTITIONS,
                error_message="Topic already has 2 partitions.",
            )
        else:
            answer.topics.add(name=topic.name)
    return answer


@pytest.mark.parametrize("version", range(PARTITIONS.version_min, PARTITIONS.version_max + 1))
def test_create_partitions_with_errors_and_refused_assignments(version: int) -> None:
    admin = FakeAdmin(CreatePartitions=grown_answer)
    module = request_types(PARTITIONS.key, version)
    placed = (module.CreatePartitionsAssignment(broker_ids=(1,)),)
    request = module.CreatePartitionsRequest(
        topics=(
            module.CreatePartitionsTopic(name="grow", count=4, assignments=None),
            module.CreatePartitionsTopic(name="manual", count=4, assignments=placed),
            module.CreatePartitionsTopic(name="shrink", count=1, assignments=None),
        ),
        timeout=TIMEOUT,
        validate_only=True,
    )
    response = through_the_wire(PARTITIONS, context(version, admin), request)
    assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
        ("grow", ErrorCode.none, None),
        ("manual", ErrorCode.invalid_request, ASSIGNMENTS_REFUSED),
        ("shrink", ErrorCode.invalid_partitions, "Topic already has 2 partitions."),
    ]
    forwarded = admin.calls[0][1]
    assert forwarded.validate_only
    assert [(t.name, t.count) for t in forwarded.topics] == [("grow", 4), ("shrink", 1)]


def _describe_refused(request: Any) -> admin_pb2.DescribeConfigsResponse:
    answer = admin_pb2.DescribeConfigsResponse()
    answer.header.error_code = common_pb2.NOT_CONTROLLER
    return answer


def test_create_topics_v5_reports_configs_it_could_not_read_back() -> None:
    admin = FakeAdmin(CreateTopics=created_answer, DescribeConfigs=_describe_refused)
    (result,) = through_the_wire(
        CREATE, context(5, admin), _create_request(5, _topic(5, "t"))
    ).topics
    assert (result.error_code, result.topic_config_error_code) == (
        ErrorCode.none,
        ErrorCode.not_controller,
    )
    assert (result.num_partitions, result.configs) == (3, ())
