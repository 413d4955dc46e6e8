"""FindCoordinator (key 10), OffsetCommit (8) and OffsetFetch (9) over Kafka's protocol, on the
same coordinator and `__consumer_offsets` as pykraft's gRPC group calls (`GroupHandlers`).

Each handler turns the kio request into the protobuf one, calls `GroupHandlers`, and turns its
answer back. What differs from gRPC: FindCoordinator answers the coordinator's *Kafka* address
(`kafka_endpoint`), and errors that gRPC puts in the response header go where each version of
Kafka's message has room for them (per partition for OffsetCommit and OffsetFetch v1, the top
level from OffsetFetch v2 on). A commit carries `generation_id_or_member_epoch` and
`member_id` (and from v7 `group_instance_id`): a simple consumer sends -1 and "", which only a
group without members accepts; a classic group's member, its generation, checked in the same
decision that writes the offsets.
"""

from __future__ import annotations

from typing import Any, Final

from pykraft.broker.group.handlers import GROUP_KEY_TYPE
from pykraft.broker.kafka.api import Api, RequestContext, kafka_endpoint
from pykraft.broker.kafka.entities import build, has_field, nested_type, response_type
from pykraft.proto import common_pb2, group_pb2

FIND_COORDINATOR_KEY: Final = 10
OFFSET_COMMIT_KEY: Final = 8
OFFSET_FETCH_KEY: Final = 9


def find_coordinator(ctx: RequestContext, request: Any) -> Any:
    """The coordinator of a group (key_type 0, the only type before v1) at its Kafka address."""
    answer_type = response_type(FIND_COORDINATOR_KEY, ctx.api_version)
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    found = ctx.services.groups.find_coordinator(
        group_pb2.FindCoordinatorRequest(key=request.key, key_type=key_type)
    )
    code, message = int(found.header.error_code), found.header.error_message
    address = None
    if code == common_pb2.NONE:
        address = kafka_endpoint(ctx.services.manager.image, found.node_id)
        if address is None:
            code = common_pb2.COORDINATOR_NOT_AVAILABLE
            message = (
                f"broker {found.node_id} coordinates {request.key!r} but has no Kafka listener"
            )
    host, port = address if address is not None else ("", -1)
    return build(
        answer_type,
        error_code=code,
        error_message=message or None,
        node_id=found.node_id if address is not None else -1,
        host=host,
        port=port,
    )


def offset_commit(ctx: RequestContext, request: Any) -> Any:
    """Commits through `GroupHandlers.offset_commit`; a refusal of the whole request is told
    on every partition, as Kafka does."""
    committed = ctx.services.groups.offset_commit(
        group_pb2.OffsetCommitRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.generation_id_or_member_epoch,
            topics=[_commit_topic(topic) for topic in request.topics],
        ),
        instance_id=getattr(request, "group_instance_id", None),
    )
    answer_type = response_type(OFFSET_COMMIT_KEY, ctx.api_version)
    topic_type = nested_type(answer_type, "OffsetCommitResponseTopic")
    partition_type = nested_type(answer_type, "OffsetCommitResponsePartition")
    whole = int(committed.header.error_code)
    codes = {
        (topic.topic, item.partition): int(item.error_code)
        for topic in committed.topics
        for item in topic.partitions
    }
    topics = tuple(
        build(
            topic_type,
            name=topic.name,
            partitions=tuple(
                build(
                    partition_type,
                    partition_index=item.partition_index,
                    error_code=whole or codes.get((topic.name, item.partition_index), 0),
                )
                for item in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return build(answer_type, topics=topics)


def _commit_topic(topic: Any) -> group_pb2.OffsetCommitTopic:
    return group_pb2.OffsetCommitTopic(
        topic=topic.name,
        partitions=[
            group_pb2.OffsetCommitPartition(
                partition=item.partition_index,
                committed_offset=item.committed_offset,
                committed_leader_epoch=getattr(item, "committed_leader_epoch", -1),
                committed_metadata=item.committed_metadata or "",
            )
            for item in topic.partitions
        ],
    )


def offset_fetch(ctx: RequestContext, request: Any) -> Any:
    """Committed offsets through `GroupHandlers.offset_fetch` (null topics: all of them, v2+);
    -1 where the group has none."""
    wanted = request.topics or ()
    fetched = ctx.services.groups.offset_fetch(
        group_pb2.OffsetFetchRequest(
            group_id=request.group_id,
            topics=[
                group_pb2.TopicPartitions(topic=topic.name, partitions=topic.partition_indexes)
                for topic in wanted
            ],
        )
    )
    answer_type = response_type(OFFSET_FETCH_KEY, ctx.api_version)
    topic_type = nested_type(answer_type, "OffsetFetchResponseTopic")
    partition_type = nested_type(answer_type, "OffsetFetchResponsePartition")
    whole = int(fetched.header.error_code)
    # v1 has no top-level error: a refusal is told on every partition asked for.
    per_partition = 0 if has_field(answer_type, "error_code") else whole
    if whole != common_pb2.NONE:
        fetched = group_pb2.OffsetFetchResponse(
            topics=[
                group_pb2.OffsetFetchTopic(
                    topic=topic.name,
                    partitions=[
                        group_pb2.OffsetFetchPartition(
                            partition=p, committed_offset=-1, committed_leader_epoch=-1
                        )
                        for p in topic.partition_indexes
                    ],
                )
                for topic in wanted
            ]
        )
    topics = tuple(
        build(
            topic_type,
            name=topic.topic,
            partitions=tuple(
                build(
                    partition_type,
                    partition_index=item.partition,
                    committed_offset=item.committed_offset,
                    committed_leader_epoch=item.committed_leader_epoch,
                    metadata=item.metadata,
                    error_code=per_partition or int(item.error_code),
                )
                for item in topic.partitions
            ),
        )
        for topic in fetched.topics
    )
    return build(answer_type, topics=topics, error_code=whole)


APIS: tuple[Api, ...] = (
    Api(FIND_COORDINATOR_KEY, 0, 3, find_coordinator),
    Api(OFFSET_COMMIT_KEY, 2, 8, offset_commit),
    Api(OFFSET_FETCH_KEY, 1, 7, offset_fetch),
)
