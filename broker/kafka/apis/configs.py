"""DescribeConfigs (32) and IncrementalAlterConfigs (44): forwarded to the controller.

The controller resolves values and sources and validates changes (`quorum/controller/configs.py`),
for topic (2) and broker (4) resources; other resource types come back INVALID_REQUEST from it.
A null or empty key list describes every key. pykraft alters configs with SET and DELETE only:
a resource asking APPEND or SUBTRACT is refused with INVALID_REQUEST here, not forwarded.
"""

from __future__ import annotations

from typing import Any, Final

from pykraft.broker.kafka.api import Api, RequestContext
from pykraft.broker.kafka.apis.admin_answers import error_fields, forward_items, refusal
from pykraft.broker.kafka.apis.config_entries import (
    CONFIG_TYPES,
    entry_fields,
    kafka_value,
    synonym_name,
)
from pykraft.broker.kafka.apis.request_items import in_request_order
from pykraft.broker.kafka.entities import NO_THROTTLE, response_module
from pykraft.proto import admin_pb2, common_pb2

DESCRIBE_CONFIGS: Final = 32
INCREMENTAL_ALTER_CONFIGS: Final = 44
_FIRST_WITH_TYPES: Final = 3  # DescribeConfigs returns config_type and documentation from v3
_OPS: Final = {0: admin_pb2.ALTER_CONFIG_SET, 1: admin_pb2.ALTER_CONFIG_DELETE}
_OP_NAMES: Final = {2: "APPEND", 3: "SUBTRACT"}


def describe_configs(ctx: RequestContext, request: Any) -> Any:
    """One result per resource, in order; each with its entries in Kafka's shape."""
    forwarded = admin_pb2.DescribeConfigsRequest()
    for resource in request.resources:
        forwarded.resources.add(
            type=resource.resource_type,
            name=resource.resource_name,
            keys=resource.configuration_keys or (),
        )
    results = forward_items(ctx, "DescribeConfigs", forwarded, "results", _keys(forwarded))
    module = response_module(DESCRIBE_CONFIGS, ctx.api_version)
    return module.DescribeConfigsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            _resource_result(
                module.DescribeConfigsResult,
                resource,
                result,
                configs=tuple(
                    _described(ctx, module, request, resource.resource_type, entry)
                    for entry in result.entries
                ),
            )
            for resource, result in zip(request.resources, results, strict=True)
        ),
    )


def _keys(forwarded: Any) -> list[dict[str, Any]]:
    """What identifies each forwarded resource (`forward_items`' keys)."""
    return [{"type": r.type, "name": r.name} for r in forwarded.resources]


def _resource_result(result_type: type[Any], resource: Any, result: Any, **fields: Any) -> Any:
    """A resource's result entity: the resource as the request named it, the controller's
    error for it, and `fields`."""
    return result_type(
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        **error_fields(result),
        **fields,
    )


def _described(
    ctx: RequestContext, module: Any, request: Any, resource_type: int, entry: Any
) -> Any:
    """One entry; synonyms only when asked, type and documentation from v3 (the latter when
    asked)."""
    synonyms: tuple[Any, ...] = ()
    if request.include_synonyms:
        name = synonym_name(resource_type, entry)
        synonyms = (
            module.DescribeConfigsSynonym(name=name, value=kafka_value(entry), source=entry.source),
        )
    fields: dict[str, Any] = {}
    if ctx.api_version >= _FIRST_WITH_TYPES:
        fields["config_type"] = CONFIG_TYPES.get(entry.type, 0)
        asked = request.include_documentation and entry.documentation
        fields["documentation"] = entry.documentation if asked else None
    return module.DescribeConfigsResourceResult(**entry_fields(entry), synonyms=synonyms, **fields)


def incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    """One result per resource, in order; all or nothing per resource (the controller's rule)."""
    forwarded = admin_pb2.AlterConfigsRequest(validate_only=request.validate_only)
    refused: dict[int, admin_pb2.AlterConfigsResult] = {}
    for index, resource in enumerate(request.resources):
        key = {"type": resource.resource_type, "name": resource.resource_name}
        unsupported = sorted({c.config_operation for c in resource.configs} - _OPS.keys())
        if unsupported:
            named = [_OP_NAMES.get(op, str(op)) for op in unsupported]
            message = f"pykraft alters configs with SET and DELETE only, not {named}."
            refused[index] = refusal(
                admin_pb2.AlterConfigsResult, common_pb2.INVALID_REQUEST, message, **key
            )
            continue
        forwarded.resources.add(
            **key,
            configs=[
                admin_pb2.AlterableConfig(
                    name=c.name, op=_OPS[c.config_operation], value=c.value or ""
                )
                for c in resource.configs
            ],
        )
    answered = forward_items(ctx, "IncrementalAlterConfigs", forwarded, "results", _keys(forwarded))
    module = response_module(INCREMENTAL_ALTER_CONFIGS, ctx.api_version)
    results = in_request_order(len(request.resources), refused, answered)
    return module.IncrementalAlterConfigsResponse(
        throttle_time=NO_THROTTLE,
        responses=tuple(
            _resource_result(module.AlterConfigsResourceResponse, resource, result)
            for resource, result in zip(request.resources, results, strict=True)
        ),
    )


APIS: tuple[Api, ...] = (
    Api(DESCRIBE_CONFIGS, 1, 4, describe_configs),
    Api(INCREMENTAL_ALTER_CONFIGS, 0, 1, incremental_alter_configs),
)
