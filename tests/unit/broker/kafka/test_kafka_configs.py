"""DescribeConfigs and IncrementalAlterConfigs over Kafka's protocol, through kio's codec."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.apis.configs import APIS
from pykraft.proto import admin_pb2, common_pb2
from tests.unit.broker.kafka.admin_wire import FakeAdmin, context
from tests.unit.broker.kafka.kio_wire import request_types, through_the_wire

DESCRIBE, ALTER = APIS
TOPIC, BROKER = admin_pb2.CONFIG_RESOURCE_TOPIC, admin_pb2.CONFIG_RESOURCE_BROKER


def described_answer(
    request: admin_pb2.DescribeConfigsRequest,
) -> admin_pb2.DescribeConfigsResponse:
    answer = admin_pb2.DescribeConfigsResponse()
    for resource in request.resources:
        result = answer.results.add(type=resource.type, name=resource.name)
        if resource.name == "missing":
            result.error_code = common_pb2.UNKNOWN_TOPIC_OR_PARTITION
            result.error_message = "Topic 'missing' does not exist."
            continue
        result.entries.add(
            name="retention.ms",
            value="86400000",
            source=admin_pb2.CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER,
            type="LONG",
            documentation="How long to keep a log.",
        )
    return answer


def _describe_request(version: int, *names: str, keys: tuple[str, ...] | None = None) -> Any:
    module = request_types(DESCRIBE.key, version)
    resources = tuple(
        module.DescribeConfigsResource(
            resource_type=TOPIC, resource_name=name, configuration_keys=keys
        )
        for name in names
    )
    extra = {"include_documentation": True} if version >= 3 else {}
    return module.DescribeConfigsRequest(resources=resources, include_synonyms=True, **extra)


@pytest.mark.parametrize("version", range(DESCRIBE.version_min, DESCRIBE.version_max + 1))
def test_describe_configs_entries_with_source_synonym_and_type(version: int) -> None:
    admin = FakeAdmin(DescribeConfigs=described_answer)
    request = _describe_request(version, "t", keys=("retention.ms",))
    (result,) = through_the_wire(DESCRIBE, context(version, admin), request).results
    assert (result.error_code, result.resource_type, result.resource_name) == (
        ErrorCode.none,
        TOPIC,
        "t",
    )
    (entry,) = result.configs
    assert (entry.name, entry.value, entry.config_source, entry.is_sensitive) == (
        "retention.ms",
        "86400000",
        admin_pb2.CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER,
        False,
    )
    assert [(s.name, s.value) for s in entry.synonyms] == [("log.retention.ms", "86400000")]
    if version >= 3:
        assert (entry.config_type, entry.documentation) == (5, "How long to keep a log.")
    assert list(admin.calls[0][1].resources[0].keys) == ["retention.ms"]


def test_describe_configs_null_keys_ask_for_every_key() -> None:
    admin = FakeAdmin(DescribeConfigs=described_answer)
    through_the_wire(DESCRIBE, context(4, admin), _describe_request(4, "t"))
    assert list(admin.calls[0][1].resources[0].keys) == []


def test_describe_configs_translates_a_resources_error() -> None:
    admin = FakeAdmin(DescribeConfigs=described_answer)
    response = through_the_wire(DESCRIBE, context(1, admin), _describe_request(1, "missing", "t"))
    missing, found = response.results
    assert (missing.error_code, missing.error_message, missing.configs) == (
        ErrorCode.unknown_topic_or_partition,
        "Topic 'missing' does not exist.",
        (),
    )
    assert found.error_code == ErrorCode.none


def altered_answer(request: admin_pb2.AlterConfigsRequest) -> admin_pb2.AlterConfigsResponse:
    answer = admin_pb2.AlterConfigsResponse()
    for resource in request.resources:
        result = answer.results.add(type=resource.type, name=resource.name)
        if resource.configs[0].value == "bad":
            result.error_code = common_pb2.INVALID_CONFIG
            result.error_message = "Invalid value bad for retention.ms."
    return answer


def _alter_resource(module: Any, name: str, op: int, value: str | None) -> Any:
    config = module.AlterableConfig(name="retention.ms", config_operation=op, value=value)
    return module.AlterConfigsResource(resource_type=TOPIC, resource_name=name, configs=(config,))


@pytest.mark.parametrize("version", range(ALTER.version_min, ALTER.version_max + 1))
def test_incremental_alter_configs_set_delete_and_refused_append(version: int) -> None:
    admin = FakeAdmin(IncrementalAlterConfigs=altered_answer)
    module = request_types(ALTER.key, version)
    request = module.IncrementalAlterConfigsRequest(
        resources=(
            _alter_resource(module, "set", 0, "1000"),
            _alter_resource(module, "append", 2, "x"),
            _alter_resource(module, "delete", 1, None),
            _alter_resource(module, "bad", 0, "bad"),
        ),
        validate_only=True,
    )
    response = through_the_wire(ALTER, context(version, admin), request)
    assert [(r.resource_name, r.error_code) for r in response.responses] == [
        ("set", ErrorCode.none),
        ("append", ErrorCode.invalid_request),
        ("delete", ErrorCode.none),
        ("bad", ErrorCode.invalid_config),
    ]
    assert response.responses[1].error_message == (
        "pykraft alters configs with SET and DELETE only, not ['APPEND']."
    )
    assert response.responses[3].error_message == "Invalid value bad for retention.ms."
    forwarded = admin.calls[0][1]
    assert forwarded.validate_only
    assert [(r.name, r.configs[0].op) for r in forwarded.resources] == [
        ("set", admin_pb2.ALTER_CONFIG_SET),
        ("delete", admin_pb2.ALTER_CONFIG_DELETE),
        ("bad", admin_pb2.ALTER_CONFIG_SET),
    ]
