"""The classic group protocol's state machine on its own, with time as an argument: the join
barrier, MEMBER_ID_REQUIRED, the leader's sync, heartbeats during a rebalance, leaving, session
and rebalance timeouts, commit checks, and a seeded simulation of its invariants."""

from __future__ import annotations

import os
import random

from pykraft.broker.group.classic import (
    COMPLETING_REBALANCE,
    INCONSISTENT_GROUP_PROTOCOL,
    MEMBER_ID_REQUIRED,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroups,
    JoinAnswer,
    JoinRequest,
    SyncAnswer,
)
from pykraft.proto import common_pb2

G = "g"
SESSION_MS = 10_000
REBALANCE_MS = 5_000


def _request(
    member_id: str = "", *, v4: bool = False, protocols: tuple[str, ...] = ("range",)
) -> JoinRequest:
    return JoinRequest(
        group_id=G,
        member_id=member_id,
        protocol_type="consumer",
        protocols=tuple((name, name.encode()) for name in protocols),
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=REBALANCE_MS,
        client_id="c",
        client_host="/127.0.0.1",
        require_known_member_id=v4,
    )


def _join_new(groups: ClassicGroups, now_ms: int) -> str:
    """A v4 join: MEMBER_ID_REQUIRED, then the join with the id; returns the id."""
    member_id, first = groups.join(_request(v4=True), now_ms)
    assert first == JoinAnswer(MEMBER_ID_REQUIRED, member_id=member_id)
    assert groups.join(_request(member_id, v4=True), now_ms) == (member_id, None)
    return member_id


def _answer(groups: ClassicGroups, member_id: str) -> JoinAnswer:
    answer = groups.join_answer(G, member_id)
    assert answer is not None
    return answer


def test_one_member_leads_and_syncs_its_own_assignment() -> None:
    groups = ClassicGroups()
    a = _join_new(groups, 0)
    answer = _answer(groups, a)
    assert (answer.error_code, answer.generation, answer.leader) == (common_pb2.NONE, 1, a)
    assert answer.protocol_name == "range"
    assert [m[0] for m in answer.members] == [a]
    assert groups.groups[G].state == COMPLETING_REBALANCE
    synced = groups.sync(G, a, 1, {a: b"A"}, 0)
    assert synced is not None and (synced.error_code, synced.assignment) == (0, b"A")
    assert groups.groups[G].state == STABLE


def test_a_second_member_starts_a_barrier_that_waits_for_the_first() -> None:
    groups = ClassicGroups()
    a = _join_new(groups, 0)
    groups.sync(G, a, 1, {a: b"A"}, 0)
    b = _join_new(groups, 10)
    assert groups.groups[G].state == PREPARING_REBALANCE
    assert groups.join_answer(G, b) is None
    assert groups.heartbeat(G, a, 1, 20) == common_pb2.REBALANCE_IN_PROGRESS
    assert groups.join(_request(a), 30) == (a, None)
    answer_a, answer_b = _answer(groups, a), _answer(groups, b)
    assert answer_a.generation == answer_b.generation == 2
    assert answer_a.leader == answer_b.leader == a
    assert len(answer_a.members) == 2 and answer_b.members == ()
    assert groups.sync(G, b, 2, {}, 40) is None  # waits for the leader
    assert groups.sync(G, a, 2, {a: b"A", b: b"B"}, 50) == groups.sync_answer(G, a, 2)
    answer = groups.sync_answer(G, b, 2)
    assert answer is not None and answer.assignment == b"B"
    assert groups.heartbeat(G, b, 2, 60) == common_pb2.NONE
    assert groups.heartbeat(G, b, 1, 60) == common_pb2.ILLEGAL_GENERATION


def test_members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() -> None:
    groups = ClassicGroups()
    a = _join_new(groups, 0)
    groups.sync(G, a, 1, {}, 0)
    b = _join_new(groups, 1_000)
    groups.tick(1_000 + REBALANCE_MS - 1)
    assert groups.join_answer(G, b) is None
    groups.tick(1_000 + REBALANCE_MS)
    assert _answer(groups, b).leader == b
    assert _answer(groups, a).error_code == common_pb2.UNKNOWN_MEMBER_ID


def test_silent_members_expire_and_the_group_empties() -> None:
    groups = ClassicGroups()
    a = _join_new(groups, 0)
    groups.sync(G, a, 1, {}, 0)
    groups.tick(SESSION_MS - 1)
    assert groups.has_members(G)
    groups.tick(SESSION_MS)
    assert not groups.has_members(G)
    assert groups.heartbeat(G, a, 1, SESSION_MS) == common_pb2.UNKNOWN_MEMBER_ID


def test_leaving_rebalances_the_rest() -> None:
    groups = ClassicGroups()
    a = _join_new(groups, 0)
    b = _join_new(groups, 0)
    groups.join(_request(a), 0)
    groups.sync(G, a, 2, {a: b"A", b: b"B"}, 0)
    assert groups.leave(G, a, 1) == common_pb2.NONE
    assert groups.leave(G, a, 1) == common_pb2.UNKNOWN_MEMBER_ID
    assert groups.heartbeat(G, b, 2, 2) == common_pb2.REBALANCE_IN_PROGRESS
    groups.join(_request(b), 3)
    assert _answer(groups, b).leader == b


def test_refusals() -> None:
    groups = ClassicGroups()
    assert groups.join(_request("ghost"), 0)[1] == JoinAnswer(common_pb2.UNKNOWN_MEMBER_ID, "ghost")
    a = _join_new(groups, 0)
    _, other = groups.join(_request(protocols=("roundrobin",)), 0)
    assert other is not None and other.error_code == INCONSISTENT_GROUP_PROTOCOL
    assert groups.sync(G, a, 7, {}, 0) == SyncAnswer(common_pb2.ILLEGAL_GENERATION)
    new_id, answer_v3 = groups.join(_request(), 0)  # before v4: the id comes with the join
    assert answer_v3 is None and groups.join_answer(G, new_id) is None
    answer = groups.sync(G, "ghost", 1, {}, 0)
    assert answer is not None and answer.error_code == common_pb2.UNKNOWN_MEMBER_ID


def test_commit_checks() -> None:
    groups = ClassicGroups()
    assert groups.commit_error(G, "", -1) == common_pb2.NONE
    a = _join_new(groups, 0)
    assert groups.commit_error(G, "", -1) == common_pb2.UNKNOWN_MEMBER_ID
    assert groups.commit_error(G, a, 1) == common_pb2.REBALANCE_IN_PROGRESS
    groups.sync(G, a, 1, {}, 0)
    assert groups.commit_error(G, a, 1) == common_pb2.NONE
    assert groups.commit_error(G, a, 0) == common_pb2.ILLEGAL_GENERATION


def test_seeded_simulation_keeps_the_invariants() -> None:
    seed = int(os.environ.get("CLASSIC_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    groups = ClassicGroups()
    known: list[str] = []
    generation_seen = 0
    now_ms = 0
    for _ in range(2_000):
        now_ms += rng.randrange(0, 3_000)
        action = rng.randrange(6)
        if action == 0 or not known:
            known.append(_join_new(groups, now_ms))
        else:
            member = rng.choice(known)
            generation = groups.groups[G].generation if G in groups.groups else 0
            if action == 1:
                groups.join(_request(member), now_ms)
            elif action == 2:
                groups.sync(G, member, generation, {m: m.encode() for m in known}, now_ms)
            elif action == 3:
                groups.heartbeat(G, member, generation, now_ms)
            elif action == 4:
                groups.leave(G, member, now_ms)
            else:
                groups.tick(now_ms)
        group = groups.groups.get(G)
        if group is None:
            generation_seen = 0
            continue
        assert group.generation >= generation_seen, seed
        generation_seen = group.generation
        if group.state in (STABLE, COMPLETING_REBALANCE):
            assert group.leader in group.members, seed
        if group.state == STABLE:
            for member_id, stored in group.members.items():
                assert stored.assignment in (member_id.encode(), b""), seed
