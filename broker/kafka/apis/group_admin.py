"""ListGroups (key 16), DescribeGroups (15) and DeleteGroups (42) over Kafka's protocol, through
`GroupHandlers.list_groups`, `describe` and `delete`, so they see the same groups as the gRPC
admin calls.

DescribeGroups shows a classic group as Kafka does (its state, protocol type, and once Stable
its protocol and each member's metadata; every member's assignment bytes), and a KIP-848 group
the way Kafka's DescribeGroups shows a consumer group: protocol type "consumer", the assignor
as protocol data, each member's subscription and assignment in the embedded consumer
protocol's v0 encoding. A group that does not exist is answered as Kafka answers it up to v5:
state "Dead", no members, no error.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any, Final

from kio.schema.consumer_protocol_assignment.v0.data import (
    ConsumerProtocolAssignment,
    TopicPartition,
)
from kio.schema.consumer_protocol_subscription.v0.data import ConsumerProtocolSubscription
from kio.schema.types import TopicName
from kio.serial import entity_writer
from kio.static.primitive import i32

from pykraft.broker.group.classic_group import DescribedClassicGroup
from pykraft.broker.group.consumer_group import DEAD
from pykraft.broker.group.coordinator import CoordinatorError
from pykraft.broker.group.handlers import GroupHandlers
from pykraft.broker.group.shard import PROTOCOL_TYPE
from pykraft.broker.kafka.api import Api, RequestContext
from pykraft.broker.kafka.entities import build, nested_type, response_type
from pykraft.proto import common_pb2, group_pb2

LIST_GROUPS_KEY: Final = 16
DESCRIBE_GROUPS_KEY: Final = 15
DELETE_GROUPS_KEY: Final = 42
# The embedded consumer protocol's version these answers are encoded in.
_EMBEDDED_VERSION: Final = (0).to_bytes(2, "big")


def list_groups(ctx: RequestContext, request: Any) -> Any:
    """Every group this broker coordinates (v4+: only those in `states_filter`)."""
    states = getattr(request, "states_filter", ())
    listed = ctx.services.groups.list_groups(group_pb2.ListGroupsRequest(states_filter=states))
    answer_type = response_type(LIST_GROUPS_KEY, ctx.api_version)
    group_type = nested_type(answer_type, "ListedGroup")
    groups = tuple(
        build(
            group_type,
            group_id=group.group_id,
            protocol_type=group.protocol_type,
            group_state=group.group_state,
        )
        for group in listed.groups
    )
    return build(answer_type, error_code=listed.header.error_code, groups=groups)


def describe_groups(ctx: RequestContext, request: Any) -> Any:
    answer_type = response_type(DESCRIBE_GROUPS_KEY, ctx.api_version)
    group_type = nested_type(answer_type, "DescribedGroup")
    member_type = nested_type(answer_type, "DescribedGroupMember")
    groups = tuple(
        _described(ctx.services.groups, group_id, group_type, member_type)
        for group_id in request.groups
    )
    return build(answer_type, groups=groups)


def _described(
    groups: GroupHandlers, group_id: str, group_type: type[Any], member_type: type[Any]
) -> Any:
    """The group as a classic one if it is, else as a KIP-848 one (or Dead)."""
    try:
        classic = groups.classic(
            group_id, lambda shard, _now, _wall: shard.classic.describe(group_id), notify=False
        )
    except CoordinatorError as error:
        return build(
            group_type,
            error_code=error.error_code,
            group_id=group_id,
            group_state="",
            protocol_type="",
            protocol_data="",
            members=(),
        )
    if classic is None:
        return _kip848_group(groups, group_id, group_type, member_type)
    return _classic_group(group_id, classic, group_type, member_type)


def _classic_group(
    group_id: str, group: DescribedClassicGroup, group_type: type[Any], member_type: type[Any]
) -> Any:
    members = tuple(
        build(
            member_type,
            member_id=member.member_id,
            group_instance_id=member.instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            member_metadata=member.subscription,
            member_assignment=member.assignment,
        )
        for member in group.members
    )
    return build(
        group_type,
        error_code=common_pb2.NONE,
        group_id=group_id,
        group_state=group.state,
        protocol_type=group.protocol_type,
        protocol_data=group.protocol_name,
        members=members,
    )


def _kip848_group(
    groups: GroupHandlers, group_id: str, group_type: type[Any], member_type: type[Any]
) -> Any:
    (group,) = groups.describe(group_pb2.ConsumerGroupDescribeRequest(group_ids=[group_id])).groups
    code = int(group.error_code)
    if code == common_pb2.GROUP_ID_NOT_FOUND:
        code, state = common_pb2.NONE, DEAD
    else:
        state = group.group_state
    members = tuple(
        build(
            member_type,
            member_id=member.member_id,
            group_instance_id=member.instance_id or None,
            client_id=member.client_id,
            client_host=member.client_host,
            member_metadata=subscription_bytes(member.subscribed_topic_names),
            member_assignment=assignment_bytes(member.assignment),
        )
        for member in group.members
    )
    return build(
        group_type,
        error_code=code,
        group_id=group.group_id,
        group_state=state,
        protocol_type=PROTOCOL_TYPE if state != DEAD else "",
        protocol_data=group.assignor_name,
        members=members,
    )


def delete_groups(ctx: RequestContext, request: Any) -> Any:
    deleted = ctx.services.groups.delete(
        group_pb2.DeleteGroupsRequest(group_ids=request.groups_names)
    )
    answer_type = response_type(DELETE_GROUPS_KEY, ctx.api_version)
    result_type = nested_type(answer_type, "DeletableGroupResult")
    results = tuple(
        build(result_type, group_id=result.group_id, error_code=result.error_code)
        for result in deleted.results
    )
    return build(answer_type, results=results)


def subscription_bytes(topics: Iterable[str]) -> bytes:
    """A member's subscription as the consumer protocol embeds it (version 0)."""
    return _embedded(ConsumerProtocolSubscription(topics=tuple(topics)))


def assignment_bytes(assignment: Iterable[group_pb2.TopicPartitions]) -> bytes:
    """A member's partitions as the consumer protocol embeds them (version 0)."""
    partitions = tuple(
        TopicPartition(
            topic=TopicName(item.topic), partitions=tuple(i32(p) for p in item.partitions)
        )
        for item in assignment
    )
    return _embedded(ConsumerProtocolAssignment(assigned_partitions=partitions))


def _embedded(entity: ConsumerProtocolSubscription | ConsumerProtocolAssignment) -> bytes:
    buffer = io.BytesIO()
    buffer.write(_EMBEDDED_VERSION)
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


APIS: tuple[Api, ...] = (
    Api(LIST_GROUPS_KEY, 0, 4, list_groups),
    Api(DESCRIBE_GROUPS_KEY, 0, 5, describe_groups),
    Api(DELETE_GROUPS_KEY, 0, 2, delete_groups),
)
