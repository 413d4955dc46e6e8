"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup over Kafka's protocol, through kio's codec, on
the real GroupHandlers and shard: every version we advertise, the blocking join barrier and
sync with two members on threads, commits by generation (checked in the decision that writes
them), static members, the initial rebalance delay, and KIP-848 groups kept apart."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from pykraft.broker.group.config import GroupConfig
from pykraft.broker.kafka.apis import group_admin
from pykraft.proto import common_pb2, group_pb2
from tests.unit.broker.kafka.classic_calls import (
    JOIN,
    LEAVE,
    SYNC,
    G,
    beat,
    commit,
    describe,
    join,
    join_new,
    leave,
    sync,
)
from tests.unit.broker.kafka.group_harness import GroupWorld, call, part

WAIT_S = 10.0


@pytest.mark.parametrize("version", range(JOIN.version_min, JOIN.version_max + 1))
def test_one_member_at_every_version(version: int) -> None:
    services = GroupWorld().services()
    joined = join_new(services, version)
    assert joined.error_code == ErrorCode.none
    assert (joined.generation_id, joined.leader, joined.protocol_name) == (
        1,
        joined.member_id,
        "range",
    )
    assert [(m.member_id, m.metadata) for m in joined.members] == [(joined.member_id, b"sub-range")]
    sync_version = min(version, SYNC.version_max)
    synced = sync(services, sync_version, joined.member_id, 1, {joined.member_id: b"mine"})
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"mine")
    assert beat(services, sync_version, joined.member_id, 1) == ErrorCode.none
    assert beat(services, sync_version, joined.member_id, 0) == ErrorCode.illegal_generation
    member = part(LEAVE, 3, "MemberIdentity", member_id=joined.member_id, group_instance_id=None)
    left = call(
        LEAVE, sync_version, services, group_id=G, member_id=joined.member_id, members=(member,)
    )
    assert left.error_code == ErrorCode.none
    assert beat(services, sync_version, joined.member_id, 1) == ErrorCode.unknown_member_id


def _in_thread(work: Callable[[], Any]) -> Callable[[], Any]:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(work()), daemon=True)
    thread.start()

    def joined() -> Any:
        thread.join(timeout=WAIT_S)
        assert result, "the call did not return"
        return result[0]

    return joined


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {WAIT_S} s"
        time.sleep(0.01)


def test_two_members_meet_at_the_barrier_and_the_leader_assigns() -> None:
    services = GroupWorld().services()
    a = join_new(services, 5).member_id
    sync(services, 3, a, 1, {a: b"all"})
    b_joined = _in_thread(lambda: join_new(services, 5))
    _wait_for(lambda: beat(services, 3, a, 1) == ErrorCode.rebalance_in_progress, "rebalance")
    a_rejoined = join(services, 5, a)
    b_answer = b_joined()
    assert a_rejoined.generation_id == b_answer.generation_id == 2
    assert a_rejoined.leader == b_answer.leader == a
    assert len(a_rejoined.members) == 2 and b_answer.members == ()
    b = b_answer.member_id
    assert commit(services, a, 2) == ErrorCode.rebalance_in_progress
    b_synced = _in_thread(lambda: sync(services, 3, b, 2))
    assert sync(services, 3, a, 2, {a: b"A", b: b"B"}).assignment == b"A"
    assert b_synced().assignment == b"B"
    assert commit(services, b, 2) == ErrorCode.none
    assert commit(services, b, 1) == ErrorCode.illegal_generation
    assert commit(services, "", -1) == ErrorCode.unknown_member_id


def _committed_offset(world: GroupWorld) -> int:
    fetched = world.services().groups.offset_fetch(
        group_pb2.OffsetFetchRequest(
            group_id=G, topics=[group_pb2.TopicPartitions(topic="orders", partitions=[0])]
        )
    )
    return fetched.topics[0].partitions[0].committed_offset


def test_a_rebalance_between_the_check_and_the_write_never_lets_a_fenced_commit_land() -> None:
    """B commits offset 5 in generation 2. Just before its commit takes the shard, B leaves
    (its session ran out), A rebalances alone into generation 3 and commits 10. B's commit
    must be refused as a whole: if its check had run before (and apart from) the write, it
    would pass and move A's offset back to 5."""
    world = GroupWorld()
    services = world.services()
    a = join_new(services, 5).member_id
    sync(services, 3, a, 1, {a: b"A"})
    b_joined = _in_thread(lambda: join_new(services, 5))
    _wait_for(lambda: beat(services, 3, a, 1) == ErrorCode.rebalance_in_progress, "rebalance")
    join(services, 5, a)
    b = b_joined().member_id
    sync(services, 3, a, 2, {a: b"A", b: b"B"})

    def rebalance_first() -> None:
        assert leave(services, (b, None)) == [ErrorCode.none]
        assert join(services, 5, a).generation_id == 3
        assert sync(services, 3, a, 3, {a: b"all"}).error_code == ErrorCode.none
        assert commit(services, a, 3, offset=10) == ErrorCode.none

    world.coordinator.before_next_run = rebalance_first
    assert commit(services, b, 2, offset=5) == ErrorCode.unknown_member_id
    assert world.coordinator.before_next_run is None, "the rebalance ran first"
    assert _committed_offset(world) == 10


def test_a_static_member_returns_under_a_new_id_and_the_old_one_is_fenced() -> None:
    """KIP-345 over the wire: the returning member (no member id, same group.instance.id)
    rejoins a Stable group without a rebalance and syncs for its assignment; the old id
    gets FENCED_INSTANCE_ID on Heartbeat, SyncGroup and OffsetCommit; LeaveGroup v3 removes
    a static member by its instance id alone."""
    services = GroupWorld().services()
    first = join(services, 5, instance_id="host-1")
    assert first.error_code == ErrorCode.none, "a static member gets no MEMBER_ID_REQUIRED"
    old = first.member_id
    assert [(m.member_id, m.group_instance_id) for m in first.members] == [(old, "host-1")]
    sync(services, 3, old, 1, {old: b"mine"}, "host-1")
    back = join(services, 5, instance_id="host-1")
    new = back.member_id
    assert (back.error_code, back.generation_id, back.leader) == (ErrorCode.none, 1, old)
    assert new != old
    assert sync(services, 3, new, 1, instance_id="host-1").assignment == b"mine"
    assert beat(services, 3, new, 1, "host-1") == ErrorCode.none
    assert beat(services, 3, old, 1, "host-1") == ErrorCode.fenced_instance_id
    assert (
        sync(services, 3, old, 1, instance_id="host-1").error_code == ErrorCode.fenced_instance_id
    )
    assert commit(services, old, 1, instance_id="host-1") == ErrorCode.fenced_instance_id
    assert commit(services, new, 1, instance_id="host-1") == ErrorCode.none
    assert leave(services, ("", "host-1"), ("", "host-2")) == [
        ErrorCode.none,
        ErrorCode.unknown_member_id,
    ]
    assert beat(services, 3, new, 1, "host-1") == ErrorCode.unknown_member_id


def test_members_started_together_land_in_one_generation() -> None:
    """group.initial.rebalance.delay.ms: the first rebalance of the Empty group waits for
    the second member (the delay is extended once because it came), so both get generation
    1; without the delay the first would form generation 1 alone."""
    world = GroupWorld(config=GroupConfig(initial_rebalance_delay_ms=3_000))
    services = world.services()
    a_joined = _in_thread(lambda: join_new(services, 5))
    _wait_for(lambda: len(describe(services).members) == 1, "first member")
    b_joined = _in_thread(lambda: join_new(services, 5))
    _wait_for(lambda: len(describe(services).members) == 2, "second member")
    world.now_ms += 3_000  # the delay ends; b came meanwhile: another 3 s
    _wait_for(lambda: describe(services).group_state == "PreparingRebalance", "a tick")
    world.now_ms += 3_000
    a_answer, b_answer = a_joined(), b_joined()
    assert a_answer.generation_id == b_answer.generation_id == 1
    assert {a_answer.leader} == {b_answer.leader} == {a_answer.member_id}
    assert len(a_answer.members) == 2


def test_a_kip848_group_id_is_refused_to_classic_members() -> None:
    world = GroupWorld()
    world.join_consumer_member(G, "m1")
    assert join(world.services(), 3).error_code == ErrorCode.inconsistent_group_protocol


def test_a_fenced_broker_answers_coordinator_not_available() -> None:
    services = GroupWorld(serving=False).services()
    assert join(services, 5).error_code == ErrorCode.coordinator_not_available
    assert beat(services, 3, "m", 1) == ErrorCode.coordinator_not_available
    assert describe(services).error_code == ErrorCode.coordinator_not_available


def test_classic_groups_are_listed_and_not_deleted_while_they_have_members() -> None:
    services = GroupWorld().services()
    a = join_new(services, 5).member_id
    listed = call(group_admin.APIS[0], 4, services, states_filter=())
    assert [(g.group_id, g.protocol_type, g.group_state) for g in listed.groups] == [
        (G, "consumer", "CompletingRebalance")
    ]
    deleted = call(group_admin.APIS[2], 2, services, groups_names=(G,))
    assert deleted.results[0].error_code == ErrorCode.non_empty_group
    leave(services, (a, None))
    listed = call(group_admin.APIS[0], 4, services, states_filter=("Empty",))
    assert [(g.group_id, g.group_state) for g in listed.groups] == [(G, "Empty")]
    deleted = call(group_admin.APIS[2], 2, services, groups_names=(G,))
    assert deleted.results[0].error_code == ErrorCode.none
    assert call(group_admin.APIS[0], 4, services, states_filter=()).groups == ()


def test_a_classic_group_id_is_refused_to_kip848_members_while_it_has_members() -> None:
    world = GroupWorld()
    services = world.services()
    a = join_new(services, 5).member_id
    heartbeat = group_pb2.ConsumerGroupHeartbeatRequest(
        group_id=G,
        member_id="m1",
        member_epoch=0,
        rebalance_timeout_ms=1_000,
        subscribed_topic_names=["orders"],
    )
    answer = services.groups.heartbeat(heartbeat, "ipv4:127.0.0.1:5000")
    assert answer.header.error_code == common_pb2.GROUP_ID_NOT_FOUND
    leave(services, (a, None))
    answer = services.groups.heartbeat(heartbeat, "ipv4:127.0.0.1:5000")
    assert answer.header.error_code == common_pb2.NONE, "an Empty classic group is taken over"
    (listed,) = call(group_admin.APIS[0], 4, services, states_filter=()).groups
    assert listed.group_state != "Empty", "the KIP-848 group's state, not the classic one's"
