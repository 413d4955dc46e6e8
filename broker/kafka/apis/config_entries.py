"""Config entries in Kafka's shape, from the controller's `ConfigEntry` answers.

Shared by DescribeConfigs and CreateTopics v5 (which returns a created topic's configs). The
protobuf entries use Kafka's numbers for sources and resource types, so those pass through;
types are names here and Kafka's ConfigType numbers on the wire. A PASSWORD config is sensitive
(its value is then sent as null, as Kafka does). Synonyms: pykraft knows where the effective value
comes from, so that one synonym is sent (named by its broker key when it is the cluster-wide
broker value of a topic config); lower-priority sources are not reported.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final

from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.api import RequestContext
from pykraft.broker.kafka.entities import kafka_error
from pykraft.metadata_log.configs import BROKER_SYNONYMS
from pykraft.proto import admin_pb2, common_pb2

# Kafka's DescribeConfigsResponse ConfigType numbers, by pykraft's type names.
CONFIG_TYPES: Final = MappingProxyType(
    {
        "BOOLEAN": 1,
        "STRING": 2,
        "INT": 3,
        "SHORT": 4,
        "LONG": 5,
        "DOUBLE": 6,
        "LIST": 7,
        "CLASS": 8,
        "PASSWORD": 9,
    }
)
_TOPIC_SYNONYMS: Final = MappingProxyType(
    {topic_key: broker_key for broker_key, topic_key in BROKER_SYNONYMS.items()}
)


def is_sensitive(entry: admin_pb2.ConfigEntry) -> bool:
    return entry.type == "PASSWORD"


def kafka_value(entry: admin_pb2.ConfigEntry) -> str | None:
    """The value Kafka shows: null for a sensitive config or one without a value."""
    return None if is_sensitive(entry) or not entry.value else entry.value


def entry_fields(entry: admin_pb2.ConfigEntry) -> dict[str, Any]:
    """The fields every Kafka config entry has (DescribeConfigs' and CreateTopics v5's)."""
    return {
        "name": entry.name,
        "value": kafka_value(entry),
        "read_only": entry.read_only,
        "config_source": entry.source,
        "is_sensitive": is_sensitive(entry),
    }


def synonym_name(resource_type: int, entry: admin_pb2.ConfigEntry) -> str:
    """The key the effective value is set under: a topic config's broker synonym when the value
    is the cluster-wide broker one, else the entry's own key."""
    cluster_wide = entry.source == admin_pb2.CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER
    if resource_type == admin_pb2.CONFIG_RESOURCE_TOPIC and cluster_wide:
        return _TOPIC_SYNONYMS.get(entry.name, entry.name)
    return entry.name


def created_topic_configs(
    ctx: RequestContext, module: Any, request: Any, results: list[Any]
) -> dict[str, tuple[ErrorCode, tuple[Any, ...]]]:
    """CreateTopics v5: (config error code, entries) per created topic, by name.

    Created topics' configs are described by the controller, which created them. With
    validate_only nothing exists to describe, so the requested configs are returned as the
    topic's own (DYNAMIC_TOPIC), the part pykraft knows without the controller.
    """
    created = [r.name for r in results if r.error_code == common_pb2.NONE]
    if request.validate_only:
        asked = {topic.name: topic.configs for topic in request.topics}
        return {name: (ErrorCode.none, _requested(module, asked[name])) for name in created}
    if not created:
        return {}
    describe = admin_pb2.DescribeConfigsRequest()
    for name in created:
        describe.resources.add(type=admin_pb2.CONFIG_RESOURCE_TOPIC, name=name)
    answer = ctx.services.admin.forward("DescribeConfigs", describe)
    described = {result.name: result for result in answer.results}  # type: ignore[attr-defined]
    header_error = kafka_error(answer.header.error_code)  # type: ignore[attr-defined]
    configs = {}
    for name in created:
        result = described.get(name)
        if result is None or result.error_code != common_pb2.NONE:
            code = header_error if result is None else kafka_error(result.error_code)
            configs[name] = (code or ErrorCode.unknown_server_error, ())
            continue
        entries = tuple(module.CreatableTopicConfigs(**entry_fields(e)) for e in result.entries)
        configs[name] = (ErrorCode.none, entries)
    return configs


def _requested(module: Any, configs: Any) -> tuple[Any, ...]:
    return tuple(
        module.CreatableTopicConfigs(
            name=config.name,
            value=config.value,
            read_only=False,
            config_source=admin_pb2.CONFIG_SOURCE_DYNAMIC_TOPIC,
            is_sensitive=False,
        )
        for config in configs
    )
