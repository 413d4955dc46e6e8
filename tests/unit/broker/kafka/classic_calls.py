"""A classic group member's Kafka requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, DescribeGroups) through kio's codec to the handlers of a `KafkaServices`, for the
tests of the classic protocol; group "g", topic "orders", protocol "range"."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.api import Api, KafkaServices
from pykraft.broker.kafka.apis import group_admin, group_offsets
from pykraft.broker.kafka.apis.classic_groups import APIS
from tests.unit.broker.kafka.group_harness import call, part

JOIN, SYNC, HEARTBEAT, LEAVE = APIS
COMMIT = group_offsets.APIS[1]
DESCRIBE = group_admin.APIS[1]
G = "g"


def join(
    services: KafkaServices,
    version: int,
    member_id: str = "",
    *,
    instance_id: str | None = None,
    protocols: tuple[str, ...] = ("range",),
) -> Any:
    offered = tuple(
        part(JOIN, version, "JoinGroupRequestProtocol", name=name, metadata=b"sub-" + name.encode())
        for name in protocols
    )
    return call(
        JOIN,
        version,
        services,
        group_id=G,
        session_timeout=timedelta(seconds=10),
        rebalance_timeout=timedelta(seconds=30),
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type="consumer",
        protocols=offered,
    )


def join_new(services: KafkaServices, version: int) -> Any:
    """A dynamic member's join: from v4 MEMBER_ID_REQUIRED first, then the join with the id."""
    answer = join(services, version)
    if version >= 4:
        assert answer.error_code == ErrorCode.member_id_required
        answer = join(services, version, answer.member_id)
    return answer


def sync(
    services: KafkaServices,
    version: int,
    member_id: str,
    generation: int,
    assigned: Mapping[str, bytes] | None = None,
    instance_id: str | None = None,
) -> Any:
    """SyncGroup; the leader's carries `assigned` (member id -> assignment)."""
    assignments = tuple(
        part(SYNC, version, "SyncGroupRequestAssignment", member_id=m, assignment=a)
        for m, a in (assigned or {}).items()
    )
    return _member_call(
        SYNC, version, services, (member_id, instance_id), generation, assignments=assignments
    )


def beat(
    services: KafkaServices,
    version: int,
    member_id: str,
    generation: int,
    instance_id: str | None = None,
) -> ErrorCode:
    answer = _member_call(HEARTBEAT, version, services, (member_id, instance_id), generation)
    code: ErrorCode = answer.error_code
    return code


def _member_call(
    api: Api,
    version: int,
    services: KafkaServices,
    identity: tuple[str, str | None],
    generation: int,
    **fields: Any,
) -> Any:
    """A request of group G's member `identity` (member id, instance id) in `generation`."""
    member_id, instance_id = identity
    return call(
        api,
        version,
        services,
        group_id=G,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        **fields,
    )


def leave(services: KafkaServices, *members: tuple[str, str | None]) -> list[ErrorCode]:
    """LeaveGroup v3: each (member id, instance id) answered on its own."""
    identities = tuple(
        part(LEAVE, 3, "MemberIdentity", member_id=m, group_instance_id=i) for m, i in members
    )
    answer = call(LEAVE, 3, services, group_id=G, member_id="", members=identities)
    assert answer.error_code == ErrorCode.none
    return [m.error_code for m in answer.members]


def commit(
    services: KafkaServices,
    member_id: str,
    generation: int,
    offset: int = 5,
    instance_id: str | None = None,
) -> ErrorCode:
    """OffsetCommit v8 of `offset` for orders-0."""
    item = part(
        COMMIT,
        8,
        "OffsetCommitRequestPartition",
        partition_index=0,
        committed_offset=offset,
        committed_metadata=None,
    )
    topic = part(COMMIT, 8, "OffsetCommitRequestTopic", name="orders", partitions=(item,))
    answer = call(
        COMMIT,
        8,
        services,
        group_id=G,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        topics=(topic,),
    )
    code: ErrorCode = answer.topics[0].partitions[0].error_code
    return code


def describe(services: KafkaServices, version: int = 5) -> Any:
    """DescribeGroups of "g" alone: its described group."""
    answer = call(DESCRIBE, version, services, groups=(G,), include_authorized_operations=False)
    (group,) = answer.groups
    return group
