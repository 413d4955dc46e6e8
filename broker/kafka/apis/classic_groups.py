"""Kafka's classic group protocol: JoinGroup (key 11) v0-5, SyncGroup (14) v0-3, Heartbeat (12)
v0-3 and LeaveGroup (13) v0-3, on the coordinator's classic groups (`broker/group/classic.py`,
reached through `GroupHandlers.classic`).

JoinGroup blocks until the join barrier completes (every known member rejoined, or the
rebalance timeout dropped the others); SyncGroup blocks until the leader's assignment arrives.
Both wait on `GroupHandlers.classic_changed`, looking again every POLL_INTERVAL_MS so timers
fire even when nobody calls. A group id used by a KIP-848 group with members is refused with
INCONSISTENT_GROUP_PROTOCOL, as Kafka does. Static members (group.instance.id, JoinGroup v5+,
SyncGroup and Heartbeat v3+, LeaveGroup v3+) are Kafka's (KIP-345; see `broker/group/classic`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, Final, TypeVar

from pykraft.broker.group.classic import INCONSISTENT_GROUP_PROTOCOL, JoinRequest, MemberIdentity
from pykraft.broker.group.classic_group import JoinAnswer, SyncAnswer
from pykraft.broker.group.coordinator import CoordinatorError
from pykraft.broker.group.handlers import GroupHandlers
from pykraft.broker.group.shard import GroupShard
from pykraft.broker.kafka.api import Api, RequestContext
from pykraft.broker.kafka.entities import build, nested_type, response_type
from pykraft.broker.waiting import wait_until
from pykraft.proto import common_pb2

JOIN_GROUP_KEY: Final = 11
HEARTBEAT_KEY: Final = 12
LEAVE_GROUP_KEY: Final = 13
SYNC_GROUP_KEY: Final = 14
# Waiting joins and syncs look at their group at least this often (timers, lost wake-ups).
POLL_INTERVAL_MS: Final = 100

A = TypeVar("A")


def join_group(ctx: RequestContext, request: Any) -> Any:
    session_ms = _ms(request.session_timeout)
    rebalance = getattr(request, "rebalance_timeout", None)
    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=session_ms if rebalance is None else _ms(rebalance),
        client_id=ctx.client_id or "",
        client_host=ctx.client_host,
        require_known_member_id=ctx.api_version >= 4,
    )
    groups = ctx.services.groups

    def joined(shard: GroupShard, now_ms: int, wall_ms: int) -> tuple[str, JoinAnswer | None]:
        kip848 = shard.groups.get(join.group_id)
        if kip848 is not None and kip848.members:
            return join.member_id, JoinAnswer(INCONSISTENT_GROUP_PROTOCOL, join.member_id)
        return shard.classic.join(join, now_ms, wall_ms)

    try:
        member_id, answer = groups.classic(join.group_id, joined)
        if answer is None:
            identity = (member_id, join.instance_id)
            answer = _await(
                groups,
                join.group_id,
                lambda shard: shard.classic.join_answer(join.group_id, identity),
                join.rebalance_timeout_ms + 2 * POLL_INTERVAL_MS,
                ctx.services.clock_ms,
            )
    except CoordinatorError as error:
        answer = JoinAnswer(error.error_code, member_id=join.member_id)
    if answer is None:
        answer = JoinAnswer(common_pb2.REBALANCE_IN_PROGRESS, member_id=join.member_id)
    return _join_response(ctx.api_version, answer)


def _join_response(version: int, answer: JoinAnswer) -> Any:
    answer_type = response_type(JOIN_GROUP_KEY, version)
    member_type = nested_type(answer_type, "JoinGroupResponseMember")
    members = tuple(
        build(member_type, member_id=member_id, group_instance_id=instance_id, metadata=metadata)
        for member_id, instance_id, metadata in answer.members
    )
    return build(
        answer_type,
        error_code=answer.error_code,
        generation_id=answer.generation,
        protocol_name=answer.protocol_name,
        leader=answer.leader,
        member_id=answer.member_id,
        members=members,
    )


def sync_group(ctx: RequestContext, request: Any) -> Any:
    group_id, generation = request.group_id, request.generation_id
    identity = _identity(request)
    assignments = {item.member_id: item.assignment for item in request.assignments}
    groups = ctx.services.groups
    try:
        answer = groups.classic(
            group_id,
            lambda shard, now_ms, wall_ms: shard.classic.sync(
                group_id, identity, generation, assignments, now_ms, wall_ms
            ),
        )
        if answer is None:
            answer = _await(
                groups,
                group_id,
                lambda shard: shard.classic.sync_answer(group_id, identity, generation),
                _rebalance_timeout_ms(groups, group_id, identity[0]),
                ctx.services.clock_ms,
            )
    except CoordinatorError as error:
        answer = SyncAnswer(error.error_code)
    if answer is None:
        answer = SyncAnswer(common_pb2.REBALANCE_IN_PROGRESS)
    return build(
        response_type(SYNC_GROUP_KEY, ctx.api_version),
        error_code=answer.error_code,
        assignment=answer.assignment,
    )


def heartbeat(ctx: RequestContext, request: Any) -> Any:
    identity = _identity(request)
    try:
        code = ctx.services.groups.classic(
            request.group_id,
            lambda shard, now_ms, wall_ms: shard.classic.heartbeat(
                request.group_id, identity, request.generation_id, now_ms
            ),
            notify=False,
        )
    except CoordinatorError as error:
        code = error.error_code
    return build(response_type(HEARTBEAT_KEY, ctx.api_version), error_code=code)


def leave_group(ctx: RequestContext, request: Any) -> Any:
    """v0-2 name one member; v3 a batch, each answered on its own, a static member by its
    instance id alone if need be."""
    answer_type = response_type(LEAVE_GROUP_KEY, ctx.api_version)
    identities = getattr(request, "members", None)
    leaving: list[MemberIdentity] = (
        [(request.member_id, None)]
        if identities is None
        else [(m.member_id, m.group_instance_id) for m in identities]
    )
    try:
        codes = ctx.services.groups.classic(
            request.group_id,
            lambda shard, now_ms, wall_ms: shard.classic.leave(
                request.group_id, leaving, now_ms, wall_ms
            ),
        )
    except CoordinatorError as error:
        return build(answer_type, error_code=error.error_code, members=())
    if identities is None:
        return build(answer_type, error_code=codes[0])
    member_type = nested_type(answer_type, "MemberResponse")
    members = tuple(
        build(
            member_type,
            member_id=identity.member_id,
            group_instance_id=identity.group_instance_id,
            error_code=code,
        )
        for identity, code in zip(identities, codes, strict=True)
    )
    return build(answer_type, error_code=common_pb2.NONE, members=members)


def _identity(request: Any) -> MemberIdentity:
    """The member a SyncGroup or Heartbeat speaks for; group_instance_id from v3."""
    return request.member_id, getattr(request, "group_instance_id", None)


def _await(
    groups: GroupHandlers,
    group_id: str,
    poll: Callable[[GroupShard], A | None],
    timeout_ms: int,
    clock_ms: Callable[[], int],
) -> A | None:
    """`poll`'s first answer that is not None, or None after `timeout_ms`. CoordinatorError
    if the coordinator moves meanwhile."""
    deadline_ms = clock_ms() + timeout_ms
    answer: A | None = None

    def answered() -> bool:
        nonlocal answer
        answer = groups.classic(group_id, lambda shard, _now, _wall: poll(shard), notify=False)
        return answer is not None

    while clock_ms() < deadline_ms:
        slice_ms = min(deadline_ms, clock_ms() + POLL_INTERVAL_MS)
        if wait_until(groups.classic_changed, answered, deadline_ms=slice_ms, clock_ms=clock_ms):
            return answer
    return None


def _rebalance_timeout_ms(groups: GroupHandlers, group_id: str, member_id: str) -> int:
    def timeout(shard: GroupShard, now_ms: int, wall_ms: int) -> int:
        group = shard.classic.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        return 0 if member is None else member.rebalance_timeout_ms

    return groups.classic(group_id, timeout, notify=False)


def _ms(duration: timedelta) -> int:
    return int(duration.total_seconds() * 1000)


APIS: tuple[Api, ...] = (
    Api(JOIN_GROUP_KEY, 0, 5, join_group),
    Api(SYNC_GROUP_KEY, 0, 3, sync_group),
    Api(HEARTBEAT_KEY, 0, 3, heartbeat),
    Api(LEAVE_GROUP_KEY, 0, 3, leave_group),
)
