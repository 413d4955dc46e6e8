"""Dynamic configs: describe and incrementally alter them (Kafka's ConfigurationControlManager).

Where a value comes from, most specific first (Kafka's order, without static server.properties):
- a topic config: the topic's own override (DYNAMIC_TOPIC), then the cluster-wide value of its
  broker synonym, e.g. `log.retention.ms` for `retention.ms` (DYNAMIC_DEFAULT_BROKER), then its
  default (DEFAULT);
- a broker config of broker N: broker N's override (DYNAMIC_BROKER), then the cluster-wide value
  (DYNAMIC_DEFAULT_BROKER), then its default. The cluster-wide resource is broker "".

Only known keys can be set, and every value is validated and stored in normal form.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from pykraft.metadata_log.configs import (
    BROKER_SYNONYMS,
    ConfigDef,
    config_definitions,
    validate_config,
)
from pykraft.metadata_log.errors import ConfigValidationError
from pykraft.metadata_log.image import MetadataImage
from pykraft.metadata_log.records import ConfigRecord, ConfigResourceType
from pykraft.proto import admin_pb2, common_pb2
from pykraft.quorum.controller.guards import duplicates
from pykraft.quorum.controller.result import (
    ControllerResult,
    OperationTooLarge,
    RecordBuffer,
    refused_whole,
)
from pykraft.server_common.errors import ApiError, fill_error, ok_header

CLUSTER_DEFAULT_BROKER: Final = ""

_SOURCE_DEFAULT: Final = admin_pb2.CONFIG_SOURCE_DEFAULT
_TOPIC_SYNONYMS: Final[Mapping[str, str]] = MappingProxyType(
    {topic_key: broker_key for broker_key, topic_key in BROKER_SYNONYMS.items()}
)

# One place a value may be set: (resource type, resource name, key, source it reports).
_Link = tuple[ConfigResourceType, str, str, "admin_pb2.ConfigSource"]


@dataclass(frozen=True, slots=True)
class EffectiveValue:
    """A config's value as a reader sees it, and where it comes from.

    `value` is None when the key is set nowhere and Kafka defines no default for it.
    """

    value: str | None
    source: admin_pb2.ConfigSource


def _lookup_chain(resource_type: ConfigResourceType, resource_name: str, key: str) -> list[_Link]:
    broker = ConfigResourceType.BROKER
    cluster_wide = admin_pb2.CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER
    if resource_type is ConfigResourceType.TOPIC:
        chain: list[_Link] = [
            (resource_type, resource_name, key, admin_pb2.CONFIG_SOURCE_DYNAMIC_TOPIC)
        ]
        synonym = _TOPIC_SYNONYMS.get(key)
        if synonym is not None:
            chain.append((broker, CLUSTER_DEFAULT_BROKER, synonym, cluster_wide))
        return chain
    chain = []
    if resource_name != CLUSTER_DEFAULT_BROKER:
        chain.append((broker, resource_name, key, admin_pb2.CONFIG_SOURCE_DYNAMIC_BROKER))
    chain.append((broker, CLUSTER_DEFAULT_BROKER, key, cluster_wide))
    return chain


def effective_value(
    image: MetadataImage, resource_type: ConfigResourceType, resource_name: str, key: str
) -> EffectiveValue:
    """The value of a known config `key` of a resource, resolved as the module docstring says."""
    for link_type, link_name, link_key, source in _lookup_chain(resource_type, resource_name, key):
        value = image.configs.get(link_type, link_name).get(link_key)
        if value is not None:
            return EffectiveValue(value, source)
    return EffectiveValue(config_definitions(resource_type)[key].default, _SOURCE_DEFAULT)


def cluster_default(image: MetadataImage, key: str) -> str:
    """The cluster-wide value of broker config `key` (broker "" override, else Kafka's default)."""
    value = effective_value(image, ConfigResourceType.BROKER, CLUSTER_DEFAULT_BROKER, key).value
    assert value is not None, f"broker config {key} has no default"
    return value


def topic_flag(image: MetadataImage, topic_name: str, key: str) -> bool:
    """The effective value of a BOOLEAN topic config (stored values are normalized)."""
    return effective_value(image, ConfigResourceType.TOPIC, topic_name, key).value == "true"


def config_entry(
    image: MetadataImage, resource_type: ConfigResourceType, resource_name: str, key: str
) -> admin_pb2.ConfigEntry:
    """One described config: effective value, source, type and documentation."""
    definition: ConfigDef = config_definitions(resource_type)[key]
    effective = effective_value(image, resource_type, resource_name, key)
    return admin_pb2.ConfigEntry(
        name=key,
        value=effective.value or "",
        source=effective.source,
        is_default=effective.source == _SOURCE_DEFAULT,
        read_only=False,
        type=definition.type.value,
        documentation=definition.documentation,
    )


def validated_value(resource_type: ConfigResourceType, key: str, value: str) -> str | ApiError:
    """`value` in normal form, or INVALID_CONFIG with the validator's sentence (also for an
    unknown key)."""
    try:
        return validate_config(resource_type, key, value)
    except ConfigValidationError as error:
        return ApiError(common_pb2.INVALID_CONFIG, str(error))


def _resource(
    image: MetadataImage, proto_type: int, name: str, *, must_be_registered: bool
) -> ConfigResourceType | ApiError:
    """The resource type after checking the resource may be addressed.

    A topic must exist. A broker is "" (cluster-wide) or a broker id; describing also needs the
    broker registered, while altering does not, so a broker can be configured before it starts
    (as in Kafka).
    """
    if proto_type == admin_pb2.CONFIG_RESOURCE_TOPIC:
        if image.topics.get_by_name(name) is None:
            return ApiError(
                common_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name!r} does not exist."
            )
        return ConfigResourceType.TOPIC
    if proto_type != admin_pb2.CONFIG_RESOURCE_BROKER:
        return ApiError(
            common_pb2.INVALID_REQUEST, f"Unsupported config resource type {proto_type}."
        )
    if name == CLUSTER_DEFAULT_BROKER:
        return ConfigResourceType.BROKER
    if not (name.isascii() and name.isdigit()):
        return ApiError(
            common_pb2.INVALID_REQUEST,
            f'Broker config resource name must be "" or a broker id, not {name!r}.',
        )
    if must_be_registered and image.cluster.broker(int(name)) is None:
        return ApiError(common_pb2.RESOURCE_NOT_FOUND, f"Broker {name} is not registered.")
    return ConfigResourceType.BROKER


def describe_configs(
    image: MetadataImage, request: admin_pb2.DescribeConfigsRequest
) -> admin_pb2.DescribeConfigsResponse:
    """Every requested key (all keys, sorted, when none is named) of each resource, in order."""
    response = admin_pb2.DescribeConfigsResponse(header=ok_header())
    for resource in request.resources:
        result = response.results.add(type=resource.type, name=resource.name)
        resource_type = _resource(image, resource.type, resource.name, must_be_registered=True)
        if isinstance(resource_type, ApiError):
            fill_error(result, resource_type)
            continue
        known = config_definitions(resource_type)
        unknown = [key for key in resource.keys if key not in known]
        if unknown:
            result.error_code = common_pb2.INVALID_CONFIG
            result.error_message = f"Unknown {resource_type.name.lower()} config(s): {unknown}."
            continue
        keys = list(resource.keys) or sorted(known)
        result.entries.extend(config_entry(image, resource_type, resource.name, k) for k in keys)
    return response


def _alter_records(
    image: MetadataImage, resource: admin_pb2.AlterConfigsResource
) -> list[ConfigRecord] | ApiError:
    """The ConfigRecords for one resource's changes (none for a no-op change), or its error."""
    resource_type = _resource(image, resource.type, resource.name, must_be_registered=False)
    if isinstance(resource_type, ApiError):
        return resource_type
    repeated = sorted(duplicates(change.name for change in resource.configs))
    if repeated:
        return ApiError(common_pb2.INVALID_REQUEST, f"Config keys repeated: {repeated}.")
    current = image.configs.get(resource_type, resource.name)
    records = []
    for change in resource.configs:
        new_value: str | None
        if change.op == admin_pb2.ALTER_CONFIG_SET:
            validated = validated_value(resource_type, change.name, change.value)
            if isinstance(validated, ApiError):
                return validated
            new_value = validated
        elif change.op == admin_pb2.ALTER_CONFIG_DELETE:
            if change.name not in config_definitions(resource_type):
                return ApiError(
                    common_pb2.INVALID_CONFIG,
                    f"Unknown {resource_type.name.lower()} config {change.name!r}.",
                )
            new_value = None
        else:
            return ApiError(common_pb2.INVALID_REQUEST, f"Unsupported config op {change.op}.")
        if current.get(change.name) != new_value:
            records.append(ConfigRecord(resource_type, resource.name, change.name, new_value))
    return records


def incremental_alter_configs(
    image: MetadataImage, request: admin_pb2.AlterConfigsRequest
) -> ControllerResult[admin_pb2.AlterConfigsResponse]:
    """SET and DELETE config keys, all or nothing per resource; other resources still succeed.

    A resource named twice in the request fails (both times) with INVALID_REQUEST, as in Kafka.
    With `validate_only` the outcome is the same but no record is written.
    """
    response = admin_pb2.AlterConfigsResponse(header=ok_header())
    buffer = RecordBuffer()
    named = Counter((resource.type, resource.name) for resource in request.resources)
    try:
        for resource in request.resources:
            result = response.results.add(type=resource.type, name=resource.name)
            outcome: list[ConfigRecord] | ApiError
            if named[(resource.type, resource.name)] > 1:
                outcome = ApiError(common_pb2.INVALID_REQUEST, "Resource named more than once.")
            else:
                outcome = _alter_records(image, resource)
            if isinstance(outcome, ApiError):
                fill_error(result, outcome)
            else:
                buffer.extend(outcome)
    except OperationTooLarge as too_large:
        keys = ({"type": r.type, "name": r.name} for r in request.resources)
        failed = refused_whole(admin_pb2.AlterConfigsResponse, too_large, "results", keys)
        return ControllerResult((), failed)
    records = () if request.validate_only else buffer.freeze()
    return ControllerResult(records, response)
