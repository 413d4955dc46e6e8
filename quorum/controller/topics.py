"""Topic decisions: create, delete and add partitions (Kafka's ReplicationControlManager rules).

`alter_partition` (ISR changes asked by partition leaders) lives in `replication.py` and is
re-exported here. Each item of a request succeeds or fails on its own;
an item that fails writes nothing. A request whose records would pass
`RECORDS_PER_OPERATION_MAX` fails as a whole with POLICY_VIOLATION.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final
from uuid import UUID

from pykraft.metadata_log.image import MetadataImage
from pykraft.metadata_log.records import (
    ConfigRecord,
    ConfigResourceType,
    PartitionRecord,
    Record,
    RemoveTopicRecord,
    TopicRecord,
)
from pykraft.proto import admin_pb2, common_pb2
from pykraft.quorum.controller.configs import cluster_default, validated_value
from pykraft.quorum.controller.guards import duplicates
from pykraft.quorum.controller.placement import PlacementError, ReplicaPlacer
from pykraft.quorum.controller.replication import alter_partition
from pykraft.quorum.controller.result import (
    ControllerResult,
    OperationTooLarge,
    RecordBuffer,
    refused_whole,
)
from pykraft.server_common.errors import ApiError, fill_error, ok_header

__all__ = ["alter_partition", "create_partitions", "create_topics", "delete_topics"]

TOPIC_NAME_LENGTH_MAX: Final = 249
_TOPIC_NAME_CHARS: Final = re.compile(r"[a-zA-Z0-9._-]+")
USE_DEFAULT: Final = -1


def topic_name_problem(name: str) -> str | None:
    """Why `name` cannot name a topic (Kafka's Topic.validate), or None if it can."""
    if not name:
        return "Topic name is empty."
    if name in (".", ".."):
        return f"Topic name cannot be {name!r}."
    if len(name) > TOPIC_NAME_LENGTH_MAX:
        return f"Topic name is {len(name)} characters long; the limit is {TOPIC_NAME_LENGTH_MAX}."
    if not _TOPIC_NAME_CHARS.fullmatch(name):
        return f"Topic name {name!r} may only contain ASCII letters, digits, '.', '_' and '-'."
    return None


def _collision_key(name: str) -> str:
    # Kafka's metric names turn '.' into '_', so "a.b" and "a_b" cannot both exist.
    return name.replace(".", "_")


@dataclass(frozen=True, slots=True)
class _NewTopic:
    """A create request item that passed validation: resolved counts and normalized configs."""

    name: str
    partition_count: int
    replication_factor: int
    configs: Mapping[str, str]


def _validate_new_topic(
    image: MetadataImage, topic: admin_pb2.CreatableTopic, taken: Mapping[str, str]
) -> _NewTopic | ApiError:
    """Checks one item in Kafka's order; `taken` maps collision keys to names already in use."""
    problem = topic_name_problem(topic.name)
    if problem is not None:
        return ApiError(common_pb2.INVALID_TOPIC_EXCEPTION, problem)
    if image.topics.get_by_name(topic.name) is not None:
        return ApiError(common_pb2.TOPIC_ALREADY_EXISTS, f"Topic {topic.name!r} already exists.")
    colliding = taken.get(_collision_key(topic.name))
    if colliding is not None:
        return ApiError(
            common_pb2.INVALID_TOPIC_EXCEPTION,
            f"Topic {topic.name!r} collides with existing topic {colliding!r} "
            "('.' and '_' are the same in metric names).",
        )
    configs = {}
    for key in sorted(topic.configs):
        value = validated_value(ConfigResourceType.TOPIC, key, topic.configs[key])
        if isinstance(value, ApiError):
            return value
        configs[key] = value
    if topic.replication_factor < USE_DEFAULT or topic.replication_factor == 0:
        return ApiError(
            common_pb2.INVALID_REPLICATION_FACTOR,
            "Replication factor must be at least 1, or -1 for the cluster default.",
        )
    if topic.num_partitions < USE_DEFAULT or topic.num_partitions == 0:
        return ApiError(
            common_pb2.INVALID_PARTITIONS,
            "Number of partitions must be at least 1, or -1 for the cluster default.",
        )
    return _NewTopic(
        topic.name,
        _or_default(image, topic.num_partitions, "num.partitions"),
        _or_default(image, topic.replication_factor, "default.replication.factor"),
        configs,
    )


def _or_default(image: MetadataImage, requested: int, broker_key: str) -> int:
    return int(cluster_default(image, broker_key)) if requested == USE_DEFAULT else requested


def _topic_records(
    topic: _NewTopic, topic_id: UUID, assignments: list[tuple[int, ...]]
) -> Iterable[Record]:
    """TopicRecord, its ConfigRecords, then one PartitionRecord per partition (Kafka's order)."""
    yield TopicRecord(topic.name, topic_id)
    for key, value in topic.configs.items():
        yield ConfigRecord(ConfigResourceType.TOPIC, topic.name, key, value)
    for partition_id, replicas in enumerate(assignments):
        yield _new_partition(topic_id, partition_id, replicas)


def _new_partition(topic_id: UUID, partition_id: int, replicas: tuple[int, ...]) -> PartitionRecord:
    # Placement uses unfenced brokers only, so every replica starts in sync; the first leads.
    return PartitionRecord(topic_id, partition_id, replicas, replicas, leader=replicas[0])


def _create_one(
    image: MetadataImage,
    topic: admin_pb2.CreatableTopic,
    taken: Mapping[str, str],
    placer: ReplicaPlacer,
    buffer: RecordBuffer,
    new_topic_id: Callable[[], UUID],
) -> tuple[_NewTopic, UUID] | ApiError:
    """Validates and places one topic, adding its records to `buffer`."""
    outcome = _validate_new_topic(image, topic, taken)
    if isinstance(outcome, ApiError):
        return outcome
    # Reserve first: an oversized topic is refused before the placer does any work for it.
    buffer.reserve(1 + len(outcome.configs) + outcome.partition_count)
    try:
        assignments = placer.place(outcome.partition_count, outcome.replication_factor)
    except PlacementError as error:
        return ApiError(
            common_pb2.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {outcome.replication_factor} time(s): {error}",
        )
    topic_id = new_topic_id()
    buffer.extend(_topic_records(outcome, topic_id, assignments))
    return outcome, topic_id


def create_topics(
    image: MetadataImage,
    request: admin_pb2.CreateTopicsRequest,
    *,
    new_topic_id: Callable[[], UUID],
) -> ControllerResult[admin_pb2.CreateTopicsResponse]:
    """Creates the valid topics of the request, one result per request item, in order.

    Defaults (-1) come from the cluster-wide broker configs `num.partitions` and
    `default.replication.factor`. Topics created earlier in the same request count for name
    collisions and for placement. With `validate_only` the results are the same, without topic
    ids, and nothing is written.
    """
    response = admin_pb2.CreateTopicsResponse(header=ok_header())
    repeated = duplicates(topic.name for topic in request.topics)
    taken = {_collision_key(name): name for name in image.topics.by_name}
    placer = ReplicaPlacer.from_image(image)
    buffer = RecordBuffer()
    try:
        for topic in request.topics:
            result = response.topics.add(name=topic.name)
            if topic.name in repeated:
                error = ApiError(common_pb2.INVALID_REQUEST, "Topic named more than once.")
                fill_error(result, error)
                continue
            outcome = _create_one(image, topic, taken, placer, buffer, new_topic_id)
            if isinstance(outcome, ApiError):
                fill_error(result, outcome)
                continue
            created, topic_id = outcome
            taken[_collision_key(topic.name)] = topic.name
            result.topic_id = "" if request.validate_only else str(topic_id)
            result.num_partitions = created.partition_count
            result.replication_factor = created.replication_factor
    except OperationTooLarge as too_large:
        names = ({"name": topic.name} for topic in request.topics)
        failed = refused_whole(admin_pb2.CreateTopicsResponse, too_large, "topics", names)
        return ControllerResult((), failed)
    return ControllerResult(() if request.validate_only else buffer.freeze(), response)


def delete_topics(
    image: MetadataImage, request: admin_pb2.DeleteTopicsRequest
) -> ControllerResult[admin_pb2.DeleteTopicsResponse]:
    """A RemoveTopicRecord per existing topic named (its configs go with it on replay)."""
    response = admin_pb2.DeleteTopicsResponse(header=ok_header())
    repeated = duplicates(request.names)
    buffer = RecordBuffer()
    try:
        for name in request.names:
            result = response.topics.add(name=name)
            topic = image.topics.get_by_name(name)
            error = None
            if name in repeated:
                error = ApiError(common_pb2.INVALID_REQUEST, "Topic named more than once.")
            elif topic is None:
                error = ApiError(
                    common_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name!r} does not exist."
                )
            if error is not None:
                fill_error(result, error)
                continue
            assert topic is not None
            buffer.extend([RemoveTopicRecord(topic.topic_id)])
            result.topic_id = str(topic.topic_id)
    except OperationTooLarge as too_large:
        names = ({"name": name} for name in request.names)
        failed = refused_whole(admin_pb2.DeleteTopicsResponse, too_large, "topics", names)
        return ControllerResult((), failed)
    return ControllerResult(buffer.freeze(), response)


def _add_partitions(
    image: MetadataImage,
    item: admin_pb2.PartitionCount,
    placer: ReplicaPlacer,
    buffer: RecordBuffer,
) -> ApiError | None:
    """Adds the PartitionRecords that grow one topic to `item.count` partitions, or the error."""
    topic = image.topics.get_by_name(item.name)
    if topic is None:
        return ApiError(
            common_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {item.name!r} does not exist."
        )
    current = len(topic.partitions)
    assert sorted(topic.partitions) == list(range(current)), "partition ids must be 0..n-1"
    if item.count == current:
        return ApiError(common_pb2.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
    if item.count < current:
        return ApiError(
            common_pb2.INVALID_PARTITIONS,
            f"Topic has {current} partitions, more than the {item.count} requested; "
            "partitions cannot be removed.",
        )
    buffer.reserve(item.count - current)
    replication_factor = len(topic.partitions[0].replicas)
    try:
        assignments = placer.place(item.count - current, replication_factor)
    except PlacementError as error:
        return ApiError(
            common_pb2.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the new partitions {replication_factor} time(s): {error}",
        )
    buffer.extend(
        _new_partition(topic.topic_id, current + index, replicas)
        for index, replicas in enumerate(assignments)
    )
    return None


def create_partitions(
    image: MetadataImage, request: admin_pb2.CreatePartitionsRequest
) -> ControllerResult[admin_pb2.CreatePartitionsResponse]:
    """Grows topics to the requested partition counts; new partitions take the replication
    factor of partition 0 and are placed like a new topic's. `validate_only` writes nothing."""
    response = admin_pb2.CreatePartitionsResponse(header=ok_header())
    repeated = duplicates(item.name for item in request.topics)
    placer = ReplicaPlacer.from_image(image)
    buffer = RecordBuffer()
    try:
        for item in request.topics:
            result = response.topics.add(name=item.name)
            error: ApiError | None
            if item.name in repeated:
                error = ApiError(common_pb2.INVALID_REQUEST, "Topic named more than once.")
            else:
                error = _add_partitions(image, item, placer, buffer)
            if error is not None:
                fill_error(result, error)
    except OperationTooLarge as too_large:
        names = ({"name": item.name} for item in request.topics)
        failed = refused_whole(admin_pb2.CreatePartitionsResponse, too_large, "topics", names)
        return ControllerResult((), failed)
    return ControllerResult(() if request.validate_only else buffer.freeze(), response)
