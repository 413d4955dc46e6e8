from __future__ import annotations

from uuid import UUID

import pytest

from pykraft.metadata_log.configs import BROKER_CONFIGS, TOPIC_CONFIGS
from pykraft.metadata_log.records import ConfigRecord, ConfigResourceType
from pykraft.proto import admin_pb2, common_pb2
from pykraft.quorum.controller import describe_configs, incremental_alter_configs
from tests.unit.quorum.controller.conftest import after, brokers, cluster_config, image_with, topic

TOPIC = admin_pb2.CONFIG_RESOURCE_TOPIC
BROKER = admin_pb2.CONFIG_RESOURCE_BROKER
SET = admin_pb2.ALTER_CONFIG_SET
DELETE = admin_pb2.ALTER_CONFIG_DELETE

IMAGE = image_with(
    *brokers(1),
    *topic("t", UUID(int=1), [(1,)], {"retention.ms": "1000"}),
    cluster_config("log.segment.bytes", "2048"),
    cluster_config("num.partitions", "3"),
    ConfigRecord(ConfigResourceType.BROKER, "1", "num.partitions", "5"),
)


def describe(
    resource_type: admin_pb2.ConfigResourceType, name: str, *keys: str
) -> admin_pb2.DescribeConfigsResult:
    request = admin_pb2.DescribeConfigsRequest(
        resources=[admin_pb2.ConfigResource(type=resource_type, name=name, keys=keys)]
    )
    (result,) = describe_configs(IMAGE, request).results
    return result


def test_describe_topic_lists_every_key_with_its_source() -> None:
    result = describe(TOPIC, "t")
    assert result.error_code == common_pb2.NONE
    entries = {entry.name: entry for entry in result.entries}
    assert list(entries) == sorted(TOPIC_CONFIGS)
    retention = entries["retention.ms"]
    assert (retention.value, retention.source, retention.is_default) == (
        "1000",
        admin_pb2.CONFIG_SOURCE_DYNAMIC_TOPIC,
        False,
    )
    assert retention.type == "LONG" and retention.documentation
    segment = entries["segment.bytes"]  # from its broker synonym log.segment.bytes
    assert (segment.value, segment.source) == (
        "2048",
        admin_pb2.CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER,
    )
    policy = entries["cleanup.policy"]
    assert (policy.value, policy.source, policy.is_default) == (
        "delete",
        admin_pb2.CONFIG_SOURCE_DEFAULT,
        True,
    )


def test_describe_broker_resolves_broker_then_cluster_then_default() -> None:
    keys = ("num.partitions", "log.segment.bytes", "default.replication.factor")
    one = {e.name: (e.value, e.source) for e in describe(BROKER, "1", *keys).entries}
    assert one == {
        "num.partitions": ("5", admin_pb2.CONFIG_SOURCE_DYNAMIC_BROKER),
        "log.segment.bytes": ("2048", admin_pb2.CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER),
        "default.replication.factor": ("1", admin_pb2.CONFIG_SOURCE_DEFAULT),
    }
    cluster = {e.name: e.value for e in describe(BROKER, "").entries}
    assert list(cluster) == sorted(BROKER_CONFIGS) and cluster["num.partitions"] == "3"


@pytest.mark.parametrize(
    ("resource_type", "name", "keys", "code"),
    [
        (TOPIC, "missing", (), common_pb2.UNKNOWN_TOPIC_OR_PARTITION),
        (TOPIC, "t", ("retention.ms", "no.such.key"), common_pb2.INVALID_CONFIG),
        (BROKER, "one", (), common_pb2.INVALID_REQUEST),
        (BROKER, "7", (), common_pb2.RESOURCE_NOT_FOUND),
        (admin_pb2.CONFIG_RESOURCE_UNKNOWN, "x", (), common_pb2.INVALID_REQUEST),
    ],
)
def test_describe_errors(
    resource_type: admin_pb2.ConfigResourceType, name: str, keys: tuple[str, ...], code: int
) -> None:
    result = describe(resource_type, name, *keys)
    assert result.error_code == code and result.error_message and not result.entries


def alter(
    *resources: admin_pb2.AlterConfigsResource, validate_only: bool = False
) -> tuple[admin_pb2.AlterConfigsResponse, tuple[object, ...]]:
    request = admin_pb2.AlterConfigsRequest(resources=resources, validate_only=validate_only)
    result = incremental_alter_configs(IMAGE, request)
    return result.response, result.records


def resource(
    resource_type: admin_pb2.ConfigResourceType,
    name: str,
    *changes: tuple[str, admin_pb2.AlterConfigOp, str],
) -> admin_pb2.AlterConfigsResource:
    return admin_pb2.AlterConfigsResource(
        type=resource_type,
        name=name,
        configs=[admin_pb2.AlterableConfig(name=k, op=op, value=v) for k, op, v in changes],
    )


def test_set_and_delete_write_normalized_records_and_apply() -> None:
    request = admin_pb2.AlterConfigsRequest(
        resources=[
            resource(
                TOPIC, "t", ("retention.ms", DELETE, ""), ("cleanup.policy", SET, "compact, delete")
            ),
            resource(BROKER, "", ("num.partitions", SET, " 6")),
        ]
    )
    result = incremental_alter_configs(IMAGE, request)
    assert [r.error_code for r in result.response.results] == [0, 0]
    assert result.records == (
        ConfigRecord(ConfigResourceType.TOPIC, "t", "retention.ms", None),
        ConfigRecord(ConfigResourceType.TOPIC, "t", "cleanup.policy", "compact,delete"),
        ConfigRecord(ConfigResourceType.BROKER, "", "num.partitions", "6"),
    )
    image = after(IMAGE, result)
    assert image.configs.get(ConfigResourceType.TOPIC, "t") == {"cleanup.policy": "compact,delete"}


def test_a_bad_change_fails_its_whole_resource_only() -> None:
    response, records = alter(
        resource(TOPIC, "t", ("segment.ms", SET, "5"), ("retention.ms", SET, "forever")),
        resource(TOPIC, "gone", ("retention.ms", SET, "1")),
        resource(BROKER, "", ("no.such.key", SET, "1")),
        resource(BROKER, "", ("no.such.key", DELETE, "")),
        resource(BROKER, "9", ("num.partitions", SET, "2")),
    )
    assert [r.error_code for r in response.results] == [
        common_pb2.INVALID_CONFIG,
        common_pb2.UNKNOWN_TOPIC_OR_PARTITION,
        common_pb2.INVALID_REQUEST,  # the cluster resource is named twice
        common_pb2.INVALID_REQUEST,
        common_pb2.NONE,  # a broker may be configured before it registers
    ]
    assert "forever" in response.results[0].error_message
    assert records == (ConfigRecord(ConfigResourceType.BROKER, "9", "num.partitions", "2"),)


@pytest.mark.parametrize("op", [SET, DELETE])
def test_unknown_key_is_invalid_config(op: admin_pb2.AlterConfigOp) -> None:
    response, records = alter(resource(BROKER, "", ("no.such.key", op, "1")))
    assert response.results[0].error_code == common_pb2.INVALID_CONFIG and records == ()


def test_repeated_key_and_bad_broker_name_are_invalid_requests() -> None:
    response, records = alter(
        resource(TOPIC, "t", ("segment.ms", SET, "5"), ("segment.ms", DELETE, "")),
        resource(BROKER, "-1", ("num.partitions", SET, "2")),
    )
    assert [r.error_code for r in response.results] == [common_pb2.INVALID_REQUEST] * 2
    assert records == ()


def test_validate_only_and_unchanged_values_write_nothing() -> None:
    change = resource(TOPIC, "t", ("segment.ms", SET, "5"))
    response, records = alter(change, validate_only=True)
    assert response.results[0].error_code == common_pb2.NONE and records == ()
    response, records = alter(resource(TOPIC, "t", ("retention.ms", SET, "1000")))
    assert response.results[0].error_code == common_pb2.NONE and records == ()
