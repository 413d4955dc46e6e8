"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37): forwarded to the controller.

The controller decides (names, defaults for -1, placement, duplicates), as for the gRPC admin
calls; these handlers only translate. pykraft places replicas itself, so a topic or a partition
increase that names its own replica assignment is refused with INVALID_REQUEST, not forwarded.
CreateTopics v5 also returns the created topic's configs, read back from the controller with a
DescribeConfigs (for validate_only, where nothing is created, the requested configs only).
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.api import Api, RequestContext
from pykraft.broker.kafka.apis.admin_answers import error_fields, forward_items, refusal
from pykraft.broker.kafka.apis.config_entries import created_topic_configs
from pykraft.broker.kafka.apis.request_items import in_request_order
from pykraft.broker.kafka.entities import NO_THROTTLE, kafka_error, millis, response_module
from pykraft.proto import admin_pb2, common_pb2

CREATE_TOPICS: Final = 19
DELETE_TOPICS: Final = 20
CREATE_PARTITIONS: Final = 37
_FIRST_WITH_TOPIC_CONFIGS: Final = 5  # CreateTopics returns num_partitions and configs from v5

ASSIGNMENTS_REFUSED: Final = (
    "pykraft places replicas itself; manual replica assignments are not supported."
)


def create_topics(ctx: RequestContext, request: Any) -> Any:
    """One result per requested topic, in order (see the module docstring)."""
    forwarded = admin_pb2.CreateTopicsRequest(
        timeout_ms=millis(request.timeout), validate_only=request.validate_only
    )
    refused: dict[int, admin_pb2.CreateTopicsResult] = {}
    for index, topic in enumerate(request.topics):
        problem = _create_problem(topic)
        if problem is not None:
            refused[index] = refusal(admin_pb2.CreateTopicsResult, *problem, name=topic.name)
            continue
        forwarded.topics.add(
            name=topic.name,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            configs={config.name: config.value for config in topic.configs},
        )
    keys = [{"name": topic.name} for topic in forwarded.topics]
    answered = forward_items(ctx, "CreateTopics", forwarded, "topics", keys)
    results = in_request_order(len(request.topics), refused, answered)
    module = response_module(CREATE_TOPICS, ctx.api_version)
    if ctx.api_version < _FIRST_WITH_TOPIC_CONFIGS:
        return module.CreateTopicsResponse(
            throttle_time=NO_THROTTLE, topics=tuple(_created(module, r) for r in results)
        )
    configs = created_topic_configs(ctx, module, request, results)
    return module.CreateTopicsResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(_created_v5(module, r, configs.get(r.name)) for r in results),
    )


def _create_problem(topic: Any) -> tuple[int, str] | None:
    """Why a topic cannot be forwarded as asked (pykraft cannot express it), or None."""
    if topic.assignments:
        return common_pb2.INVALID_REQUEST, ASSIGNMENTS_REFUSED
    unset = sorted(config.name for config in topic.configs if config.value is None)
    if unset:
        return common_pb2.INVALID_CONFIG, f"Null value not supported for topic configs: {unset}."
    return None


def _created(module: Any, result: admin_pb2.CreateTopicsResult) -> Any:
    return module.CreatableTopicResult(name=result.name, **error_fields(result))


def _created_v5(module: Any, result: admin_pb2.CreateTopicsResult, configs: Any) -> Any:
    """v5+: a created topic also carries its partition count, replication factor and configs
    (`configs` is an (error code, entries) pair); a refused one -1, -1 and null, as in Kafka."""
    if result.error_code != common_pb2.NONE:
        return module.CreatableTopicResult(name=result.name, **error_fields(result), configs=None)
    config_error, entries = configs
    return module.CreatableTopicResult(
        name=result.name,
        error_code=ErrorCode.none,
        error_message=None,
        topic_config_error_code=config_error,
        num_partitions=result.num_partitions,
        replication_factor=result.replication_factor,
        configs=entries,
    )


def delete_topics(ctx: RequestContext, request: Any) -> Any:
    """One result per named topic, in order (v1-4 name topics; ids came with v6)."""
    forwarded = admin_pb2.DeleteTopicsRequest(
        names=request.topic_names, timeout_ms=millis(request.timeout)
    )
    keys = [{"name": name} for name in request.topic_names]
    results = forward_items(ctx, "DeleteTopics", forwarded, "topics", keys)
    module = response_module(DELETE_TOPICS, ctx.api_version)
    return module.DeleteTopicsResponse(
        throttle_time=NO_THROTTLE,
        responses=tuple(
            module.DeletableTopicResult(name=r.name, error_code=kafka_error(r.error_code))
            for r in results
        ),
    )


def create_partitions(ctx: RequestContext, request: Any) -> Any:
    """Grows each topic to its requested total count; one result per topic, in order."""
    forwarded = admin_pb2.CreatePartitionsRequest(
        timeout_ms=millis(request.timeout), validate_only=request.validate_only
    )
    refused: dict[int, admin_pb2.CreatePartitionsResult] = {}
    for index, topic in enumerate(request.topics):
        if topic.assignments is not None:
            refused[index] = refusal(
                admin_pb2.CreatePartitionsResult,
                common_pb2.INVALID_REQUEST,
                ASSIGNMENTS_REFUSED,
                name=topic.name,
            )
            continue
        forwarded.topics.add(name=topic.name, count=topic.count)
    keys = [{"name": topic.name} for topic in forwarded.topics]
    answered = forward_items(ctx, "CreatePartitions", forwarded, "topics", keys)
    module = response_module(CREATE_PARTITIONS, ctx.api_version)
    return module.CreatePartitionsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            module.CreatePartitionsTopicResult(name=r.name, **error_fields(r))
            for r in in_request_order(len(request.topics), refused, answered)
        ),
    )


APIS: tuple[Api, ...] = (
    Api(CREATE_TOPICS, 2, 5, create_topics),
    Api(DELETE_TOPICS, 1, 4, delete_topics),
    Api(CREATE_PARTITIONS, 0, 3, create_partitions),
)
