"""The admin APIs answer the bytes kafka-python's client encodes, in bytes its client decodes.

kio is the codec on our side; this proves the answers also read right with a codec no one here
wrote (kafka-python's own message classes), at each API's highest served version.
"""

from __future__ import annotations

from typing import Any

import kafka.protocol.admin
from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.apis import cluster, configs, topics
from pykraft.proto import admin_pb2
from tests.unit.broker.kafka.admin_wire import FakeAdmin, context
from tests.unit.broker.kafka.kafka_python_wire import exchange
from tests.unit.broker.kafka.test_kafka_cluster import IMAGE
from tests.unit.broker.kafka.test_kafka_configs import altered_answer, described_answer
from tests.unit.broker.kafka.test_kafka_topics import created_answer, deleted_answer, grown_answer

client: Any = kafka.protocol.admin  # kafka-python ships no types
ADMIN = FakeAdmin(
    CreateTopics=created_answer,
    DeleteTopics=deleted_answer,
    CreatePartitions=grown_answer,
    DescribeConfigs=described_answer,
    IncrementalAlterConfigs=altered_answer,
)


def _exchange(api: Any, version: int, request: Any, response_type: Any) -> Any:
    return exchange(api, context(version, ADMIN, IMAGE), request, response_type)


def test_create_topics_v5() -> None:
    request_type = client.CreateTopicsRequest
    topic = request_type.CreatableTopic(
        version=5, name="t", num_partitions=-1, replication_factor=-1, assignments=[], configs=[]
    )
    request = request_type(version=5, topics=[topic], timeout_ms=5000, validate_only=False)
    (result,) = _exchange(topics.APIS[0], 5, request, client.CreateTopicsResponse).topics
    assert (result.name, result.error_code, result.num_partitions) == ("t", ErrorCode.none, 3)
    assert [(c.name, c.value) for c in result.configs] == [("retention.ms", "86400000")]


def test_delete_topics_v4() -> None:
    request = client.DeleteTopicsRequest(version=4, topic_names=["t", "x"], timeout_ms=5000)
    response = _exchange(topics.APIS[1], 4, request, client.DeleteTopicsResponse)
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("t", ErrorCode.none),
        ("x", ErrorCode.unknown_topic_or_partition),
    ]


def test_create_partitions_v3() -> None:
    request_type = client.CreatePartitionsRequest
    topic = request_type.CreatePartitionsTopic(version=3, name="t", count=1, assignments=None)
    request = request_type(version=3, topics=[topic], timeout_ms=5000, validate_only=False)
    (result,) = _exchange(topics.APIS[2], 3, request, client.CreatePartitionsResponse).results
    assert (result.error_code, result.error_message) == (
        ErrorCode.invalid_partitions,
        "Topic already has 2 partitions.",
    )


def test_describe_configs_v4() -> None:
    request_type = client.DescribeConfigsRequest
    resource = request_type.DescribeConfigsResource(
        version=4, resource_type=admin_pb2.CONFIG_RESOURCE_TOPIC, resource_name="t",
        configuration_keys=None,
    )  # fmt: skip
    request = request_type(
        version=4, resources=[resource], include_synonyms=True, include_documentation=True
    )
    (result,) = _exchange(configs.APIS[0], 4, request, client.DescribeConfigsResponse).results
    (entry,) = result.configs
    assert (entry.name, entry.value, entry.config_type) == ("retention.ms", "86400000", 5)
    assert [s.name for s in entry.synonyms] == ["log.retention.ms"]


def test_incremental_alter_configs_v1() -> None:
    request_type = client.IncrementalAlterConfigsRequest
    resource_type = request_type.AlterConfigsResource
    change = resource_type.AlterableConfig(
        version=1, name="retention.ms", config_operation=0, value="bad"
    )
    resource = resource_type(
        version=1, resource_type=admin_pb2.CONFIG_RESOURCE_TOPIC, resource_name="t",
        configs=[change],
    )  # fmt: skip
    request = request_type(version=1, resources=[resource], validate_only=False)
    response = _exchange(configs.APIS[1], 1, request, client.IncrementalAlterConfigsResponse)
    (result,) = response.responses
    assert (result.resource_name, result.error_code) == ("t", ErrorCode.invalid_config)


def test_describe_cluster_v1() -> None:
    request = client.DescribeClusterRequest(
        version=1, include_cluster_authorized_operations=False, endpoint_type=1
    )
    response = _exchange(cluster.APIS[0], 1, request, client.DescribeClusterResponse)
    assert (response.cluster_id, response.controller_id) == ("test-cluster", 1)
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [
        (1, "10.0.0.1", 9092),
        (3, "10.0.0.3", 9092),
    ]
