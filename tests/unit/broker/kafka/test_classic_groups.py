"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup over Kafka's protocol, through kio's codec, on
the real GroupHandlers and shard: every version we advertise, the blocking join barrier and
sync with two members on threads, commits by generation, and KIP-848 groups kept apart."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.api import Api
from pykraft.broker.kafka.apis import group_admin, group_offsets
from pykraft.broker.kafka.apis.classic_groups import APIS
from pykraft.proto import common_pb2, group_pb2
from tests.unit.broker.kafka.group_harness import GroupWorld, call, part

JOIN, SYNC, HEARTBEAT, LEAVE = APIS
COMMIT = group_offsets.APIS[1]
G = "g"


def _join(world: GroupWorld, version: int, member_id: str = "") -> Any:
    protocol = part(JOIN, version, "JoinGroupRequestProtocol", name="range", metadata=b"sub")
    return _as_member(
        JOIN,
        world,
        version,
        member_id,
        session_timeout=timedelta(seconds=10),
        rebalance_timeout=timedelta(seconds=30),
        protocol_type="consumer",
        protocols=(protocol,),
    )


def _join_new(world: GroupWorld, version: int) -> Any:
    answer = _join(world, version)
    if version >= 4:
        assert answer.error_code == ErrorCode.member_id_required
        answer = _join(world, version, answer.member_id)
    return answer


def _sync(
    world: GroupWorld, version: int, member_id: str, generation: int, **assigned: bytes
) -> Any:
    assignments = tuple(
        part(SYNC, version, "SyncGroupRequestAssignment", member_id=m, assignment=a)
        for m, a in assigned.items()
    )
    return _as_member(
        SYNC, world, version, member_id, generation_id=generation, assignments=assignments
    )


def _beat(world: GroupWorld, version: int, member_id: str, generation: int) -> ErrorCode:
    answer = _as_member(HEARTBEAT, world, version, member_id, generation_id=generation)
    code: ErrorCode = answer.error_code
    return code


def _as_member(api: Api, world: GroupWorld, version: int, member_id: str, **fields: Any) -> Any:
    """`api`'s answer to member `member_id` (no static instance id) of group G; `fields` are the
    rest of the request, its generation among them."""
    return call(
        api,
        version,
        world.services(),
        group_id=G,
        member_id=member_id,
        group_instance_id=None,
        **fields,
    )


@pytest.mark.parametrize("version", range(JOIN.version_min, JOIN.version_max + 1))
def test_one_member_at_every_version(version: int) -> None:
    world = GroupWorld()
    joined = _join_new(world, version)
    assert joined.error_code == ErrorCode.none
    assert (joined.generation_id, joined.leader, joined.protocol_name) == (
        1,
        joined.member_id,
        "range",
    )
    assert [(m.member_id, m.metadata) for m in joined.members] == [(joined.member_id, b"sub")]
    sync_version = min(version, SYNC.version_max)
    synced = _sync(world, sync_version, joined.member_id, 1, **{joined.member_id: b"mine"})
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"mine")
    assert _beat(world, sync_version, joined.member_id, 1) == ErrorCode.none
    assert _beat(world, sync_version, joined.member_id, 0) == ErrorCode.illegal_generation
    member = part(LEAVE, 3, "MemberIdentity", member_id=joined.member_id, group_instance_id=None)
    left = call(
        LEAVE,
        sync_version,
        world.services(),
        group_id=G,
        member_id=joined.member_id,
        members=(member,),
    )
    assert left.error_code == ErrorCode.none
    assert _beat(world, sync_version, joined.member_id, 1) == ErrorCode.unknown_member_id


def _in_thread(work: Callable[[], Any]) -> Callable[[], Any]:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(work()), daemon=True)
    thread.start()

    def joined() -> Any:
        thread.join(timeout=10)
        assert result, "the call did not return"
        return result[0]

    return joined


def _commit(world: GroupWorld, member_id: str, generation: int) -> ErrorCode:
    item = part(
        COMMIT,
        8,
        "OffsetCommitRequestPartition",
        partition_index=0,
        committed_offset=5,
        committed_metadata=None,
    )
    topic = part(COMMIT, 8, "OffsetCommitRequestTopic", name="orders", partitions=(item,))
    answer = _as_member(
        COMMIT, world, 8, member_id, generation_id_or_member_epoch=generation, topics=(topic,)
    )
    code: ErrorCode = answer.topics[0].partitions[0].error_code
    return code


def test_two_members_meet_at_the_barrier_and_the_leader_assigns() -> None:
    world = GroupWorld()
    a = _join_new(world, 5).member_id
    _sync(world, 3, a, 1, **{a: b"all"})
    b_joined = _in_thread(lambda: _join_new(world, 5))
    while _beat(world, 3, a, 1) != ErrorCode.rebalance_in_progress:
        pass
    a_rejoined = _join(world, 5, a)
    b_answer = b_joined()
    assert a_rejoined.generation_id == b_answer.generation_id == 2
    assert a_rejoined.leader == b_answer.leader == a
    assert len(a_rejoined.members) == 2 and b_answer.members == ()
    b = b_answer.member_id
    assert _commit(world, a, 2) == ErrorCode.rebalance_in_progress
    b_synced = _in_thread(lambda: _sync(world, 3, b, 2))
    assert _sync(world, 3, a, 2, **{a: b"A", b: b"B"}).assignment == b"A"
    assert b_synced().assignment == b"B"
    assert _commit(world, b, 2) == ErrorCode.none
    assert _commit(world, b, 1) == ErrorCode.illegal_generation
    assert _commit(world, "", -1) == ErrorCode.unknown_member_id


def test_a_kip848_group_id_is_refused_to_classic_members() -> None:
    world = GroupWorld()
    world.join_consumer_member(G, "m1")
    assert _join(world, 3).error_code == ErrorCode.inconsistent_group_protocol


def test_a_fenced_broker_answers_coordinator_not_available() -> None:
    world = GroupWorld(serving=False)
    assert _join(world, 5).error_code == ErrorCode.coordinator_not_available
    assert _beat(world, 3, "m", 1) == ErrorCode.coordinator_not_available


def test_classic_groups_are_listed_and_not_deleted_while_they_have_members() -> None:
    world = GroupWorld()
    a = _join_new(world, 5).member_id
    listed = call(group_admin.APIS[0], 4, world.services(), states_filter=())
    assert [(g.group_id, g.protocol_type, g.group_state) for g in listed.groups] == [
        (G, "consumer", "CompletingRebalance")
    ]
    deleted = call(group_admin.APIS[2], 2, world.services(), groups_names=(G,))
    assert deleted.results[0].error_code == ErrorCode.non_empty_group
    assert a


def test_a_classic_group_id_is_refused_to_kip848_members() -> None:
    world = GroupWorld()
    _join_new(world, 5)
    answer = world.services().groups.heartbeat(
        group_pb2.ConsumerGroupHeartbeatRequest(
            group_id=G, member_id="m1", member_epoch=0, subscribed_topic_names=["orders"]
        ),
        "ipv4:127.0.0.1:5000",
    )
    assert answer.header.error_code == common_pb2.GROUP_ID_NOT_FOUND
