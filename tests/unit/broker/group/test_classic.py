"""The classic group protocol's state machine on its own, with time as an argument: the join
barrier, MEMBER_ID_REQUIRED, the leader's sync, heartbeats during a rebalance, leaving, session
and rebalance timeouts, commit checks, static members (KIP-345), the initial rebalance delay,
and a seeded simulation of its invariants."""

from __future__ import annotations

import os
import random

from pykraft.broker.group.classic import (
    INCONSISTENT_GROUP_PROTOCOL,
    MEMBER_ID_REQUIRED,
    ClassicGroups,
    JoinRequest,
    MemberIdentity,
)
from pykraft.broker.group.classic_group import (
    COMPLETING_REBALANCE,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroup,
    JoinAnswer,
    SyncAnswer,
)
from pykraft.broker.group.config import GroupConfig
from pykraft.broker.group.records import ClassicGroupValue, RecordType
from pykraft.broker.group.shard_state import ShardState
from pykraft.proto import common_pb2

G = "g"
SESSION_MS = 10_000
REBALANCE_MS = 5_000
WALL_MS = 1_700_000_000_000  # the wall clock at monotonic 0


def _request(
    member_id: str = "",
    *,
    v4: bool = False,
    protocols: tuple[str, ...] = ("range",),
    instance_id: str | None = None,
) -> JoinRequest:
    return JoinRequest(
        group_id=G,
        member_id=member_id,
        instance_id=instance_id,
        protocol_type="consumer",
        protocols=tuple((name, name.encode()) for name in protocols),
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=REBALANCE_MS,
        client_id="c",
        client_host="/127.0.0.1",
        require_known_member_id=v4,
    )


class Classic:
    """The classic groups of one shard, driven at monotonic times (the wall clock follows),
    with the records their decisions wrote."""

    def __init__(self, *, initial_delay_ms: int = 0) -> None:
        self.state = ShardState(GroupConfig(initial_rebalance_delay_ms=initial_delay_ms))
        self.groups = ClassicGroups(self.state)

    @property
    def group(self) -> ClassicGroup:
        return self.groups.groups[G]

    def join(self, request: JoinRequest, now_ms: int) -> tuple[str, JoinAnswer | None]:
        return self.groups.join(request, now_ms, WALL_MS + now_ms)

    def join_new(self, now_ms: int) -> str:
        """A v4 join: MEMBER_ID_REQUIRED, then the join with the id; returns the id."""
        member_id, first = self.join(_request(v4=True), now_ms)
        assert first == JoinAnswer(MEMBER_ID_REQUIRED, member_id=member_id)
        assert self.join(_request(member_id, v4=True), now_ms) == (member_id, None)
        return member_id

    def answer(self, member_id: str, instance_id: str | None = None) -> JoinAnswer:
        answer = self.groups.join_answer(G, (member_id, instance_id))
        assert answer is not None
        return answer

    def sync(
        self,
        member_id: str,
        generation: int,
        now_ms: int,
        assignments: dict[str, bytes] | None = None,
        instance_id: str | None = None,
    ) -> SyncAnswer | None:
        return self.groups.sync(
            G, (member_id, instance_id), generation, assignments or {}, now_ms, WALL_MS + now_ms
        )

    def heartbeat(
        self, member_id: str, generation: int, now_ms: int, instance_id: str | None = None
    ) -> int:
        return self.groups.heartbeat(G, (member_id, instance_id), generation, now_ms)

    def leave(self, now_ms: int, *identities: MemberIdentity) -> list[int]:
        return self.groups.leave(G, list(identities), now_ms, WALL_MS + now_ms)

    def tick(self, now_ms: int) -> None:
        self.groups.tick(now_ms, WALL_MS + now_ms)

    def written(self) -> list[ClassicGroupValue | None]:
        """The values of the classic group records written since the last call."""
        records = self.state.take()
        assert {r.key.type for r in records} <= {RecordType.CLASSIC_GROUP}
        return [r.value for r in records]  # type: ignore[misc]

    def stable_pair(self) -> tuple[str, str]:
        """Two dynamic members in a Stable generation 2, the first leading ("A", "B")."""
        a = self.join_new(0)
        self.sync(a, 1, 0, {a: b"A"})
        b = self.join_new(0)
        self.join(_request(a), 0)
        self.sync(a, 2, 0, {a: b"A", b: b"B"})
        assert (self.group.state, self.group.generation) == (STABLE, 2)
        return a, b


def test_one_member_leads_and_syncs_its_own_assignment() -> None:
    classic = Classic()
    a = classic.join_new(0)
    answer = classic.answer(a)
    assert (answer.error_code, answer.generation, answer.leader) == (common_pb2.NONE, 1, a)
    assert answer.protocol_name == "range"
    assert [m[0] for m in answer.members] == [a]
    assert classic.group.state == COMPLETING_REBALANCE
    synced = classic.sync(a, 1, 0, {a: b"A"})
    assert synced is not None and (synced.error_code, synced.assignment) == (0, b"A")
    assert classic.group.state == STABLE


def test_a_second_member_starts_a_barrier_that_waits_for_the_first() -> None:
    classic = Classic()
    a = classic.join_new(0)
    classic.sync(a, 1, 0, {a: b"A"})
    b = classic.join_new(10)
    assert classic.group.state == PREPARING_REBALANCE
    assert classic.groups.join_answer(G, (b, None)) is None
    assert classic.heartbeat(a, 1, 20) == common_pb2.REBALANCE_IN_PROGRESS
    assert classic.join(_request(a), 30) == (a, None)
    answer_a, answer_b = classic.answer(a), classic.answer(b)
    assert answer_a.generation == answer_b.generation == 2
    assert answer_a.leader == answer_b.leader == a
    assert len(answer_a.members) == 2 and answer_b.members == ()
    assert classic.sync(b, 2, 40) is None  # waits for the leader
    assert classic.sync(a, 2, 50, {a: b"A", b: b"B"}) == classic.groups.sync_answer(G, (a, None), 2)
    answer = classic.groups.sync_answer(G, (b, None), 2)
    assert answer is not None and answer.assignment == b"B"
    assert classic.heartbeat(b, 2, 60) == common_pb2.NONE
    assert classic.heartbeat(b, 1, 60) == common_pb2.ILLEGAL_GENERATION


def test_members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() -> None:
    classic = Classic()
    a = classic.join_new(0)
    classic.sync(a, 1, 0)
    b = classic.join_new(1_000)
    classic.tick(1_000 + REBALANCE_MS - 1)
    assert classic.groups.join_answer(G, (b, None)) is None
    classic.tick(1_000 + REBALANCE_MS)
    assert classic.answer(b).leader == b
    assert classic.answer(a).error_code == common_pb2.UNKNOWN_MEMBER_ID


def test_silent_members_expire_and_the_group_empties() -> None:
    classic = Classic()
    a = classic.join_new(0)
    classic.sync(a, 1, 0)
    classic.tick(SESSION_MS - 1)
    assert classic.groups.has_members(G)
    classic.tick(SESSION_MS)
    assert not classic.groups.has_members(G)
    assert classic.group.state == EMPTY
    assert classic.heartbeat(a, 1, SESSION_MS) == common_pb2.UNKNOWN_MEMBER_ID


def test_leaving_rebalances_the_rest() -> None:
    classic = Classic()
    a, b = classic.stable_pair()
    assert classic.leave(1, (a, None), (a, None)) == [
        common_pb2.NONE,
        common_pb2.UNKNOWN_MEMBER_ID,
    ]
    assert classic.heartbeat(b, 2, 2) == common_pb2.REBALANCE_IN_PROGRESS
    classic.join(_request(b), 3)
    assert classic.answer(b).leader == b


def test_refusals() -> None:
    classic = Classic()
    assert classic.join(_request("ghost"), 0)[1] == JoinAnswer(
        common_pb2.UNKNOWN_MEMBER_ID, "ghost"
    )
    a = classic.join_new(0)
    _, other = classic.join(_request(protocols=("roundrobin",)), 0)
    assert other is not None and other.error_code == INCONSISTENT_GROUP_PROTOCOL
    assert classic.sync(a, 7, 0) == SyncAnswer(common_pb2.ILLEGAL_GENERATION)
    new_id, answer_v3 = classic.join(_request(), 0)  # before v4: the id comes with the join
    assert answer_v3 is None and classic.groups.join_answer(G, (new_id, None)) is None
    answer = classic.sync("ghost", 1, 0)
    assert answer is not None and answer.error_code == common_pb2.UNKNOWN_MEMBER_ID


def test_commit_checks() -> None:
    classic = Classic()
    a = classic.join_new(0)
    assert classic.group.commit_error("", None, -1) == common_pb2.UNKNOWN_MEMBER_ID
    assert classic.group.commit_error(a, None, 1) == common_pb2.REBALANCE_IN_PROGRESS
    classic.sync(a, 1, 0)
    assert classic.group.commit_error(a, None, 1) == common_pb2.NONE
    assert classic.group.commit_error(a, None, 0) == common_pb2.ILLEGAL_GENERATION
    classic.leave(1, (a, None))
    assert classic.group.state == EMPTY
    assert classic.group.commit_error("", None, -1) == common_pb2.NONE
    assert classic.group.commit_error(a, None, 2) == common_pb2.UNKNOWN_MEMBER_ID


def test_the_group_is_written_when_the_leader_syncs_and_when_it_empties() -> None:
    """Kafka's storeGroup points: nothing while the barrier is up; the whole group (chosen
    protocol's metadata, assignments) once the leader's SyncGroup makes it Stable; no
    members, a generation further, once it empties."""
    classic = Classic()
    a = classic.join_new(0)
    assert classic.written() == []
    classic.sync(a, 1, 5, {a: b"A"})
    (stable,) = classic.written()
    assert stable is not None
    assert (stable.generation, stable.protocol_name, stable.leader) == (1, "range", a)
    assert stable.state_timestamp_ms == WALL_MS + 5
    (member,) = stable.members
    assert (member.member_id, member.subscription, member.assignment) == (a, b"range", b"A")
    assert (member.session_timeout_ms, member.rebalance_timeout_ms) == (SESSION_MS, REBALANCE_MS)
    assert classic.heartbeat(a, 1, 6) == common_pb2.NONE
    assert classic.written() == []
    classic.leave(7, (a, None))
    (emptied,) = classic.written()
    assert emptied is not None
    assert (emptied.generation, emptied.members, emptied.leader) == (2, (), None)
    assert emptied.state_timestamp_ms == WALL_MS + 7


def _static_pair(classic: Classic) -> tuple[str, str]:
    """A static leader ("i-a") and a dynamic follower, Stable in generation 2."""
    a, _ = classic.join(_request(instance_id="i-a"), 0)
    classic.sync(a, 1, 0, {a: b"A"}, "i-a")
    b = classic.join_new(0)
    classic.join(_request(a, instance_id="i-a"), 0)
    classic.sync(a, 2, 0, {a: b"A", b: b"B"}, "i-a")
    assert (classic.group.state, classic.group.generation) == (STABLE, 2)
    classic.written()
    return a, b


def test_a_static_member_back_under_a_new_id_keeps_its_place_without_a_rebalance() -> None:
    classic = Classic()
    old, b = _static_pair(classic)
    new, answer = classic.join(_request(instance_id="i-a"), 100)
    assert new != old and new.startswith("i-a-")
    assert answer == JoinAnswer(
        common_pb2.NONE, member_id=new, generation=2, protocol_name="range", leader=old
    ), "the old leader id: the returning leader syncs as a follower, for its stored assignment"
    assert (classic.group.state, classic.group.generation, classic.group.leader) == (
        STABLE,
        2,
        new,
    )
    (written,) = classic.written()
    assert written is not None and [m.member_id for m in written.members] == [b, new]
    assert classic.sync(new, 2, 110, instance_id="i-a") == SyncAnswer(common_pb2.NONE, b"A")
    assert classic.heartbeat(b, 2, 120) == common_pb2.NONE
    assert classic.heartbeat(new, 2, 120, "i-a") == common_pb2.NONE
    fenced = common_pb2.FENCED_INSTANCE_ID
    assert classic.heartbeat(old, 2, 130, "i-a") == fenced
    assert classic.sync(old, 2, 130, instance_id="i-a") == SyncAnswer(fenced)
    assert classic.group.commit_error(old, "i-a", 2) == fenced
    assert classic.groups.join_answer(G, (old, "i-a")) == JoinAnswer(fenced, member_id=old)
    assert classic.join(_request(old, instance_id="i-a"), 130)[1] == JoinAnswer(fenced, old)
    assert classic.leave(140, (old, "i-a")) == [fenced]
    assert classic.heartbeat(new, 2, 150, "i-b") == common_pb2.UNKNOWN_MEMBER_ID


def test_a_static_member_that_changes_the_chosen_protocol_rebalances() -> None:
    classic = Classic()
    _, b = _static_pair(classic)
    for member in classic.group.members.values():  # both support both; range was chosen
        member.protocols = (("range", b"range"), ("roundrobin", b"roundrobin"))
    back = _request(instance_id="i-a", protocols=("roundrobin", "range"))
    new, answer = classic.join(back, 100)
    assert answer is None and classic.group.state == PREPARING_REBALANCE
    classic.join(_request(b, protocols=("range", "roundrobin")), 110)
    assert classic.answer(new, "i-a").protocol_name == "roundrobin", "the leader's tie-break"
    assert classic.answer(new, "i-a").generation == 3


def test_leave_group_names_a_static_member_by_its_instance_id() -> None:
    classic = Classic()
    _, b = _static_pair(classic)
    assert classic.leave(10, ("", "i-a"), ("", "i-zz"), ("", None)) == [
        common_pb2.NONE,
        common_pb2.UNKNOWN_MEMBER_ID,
        common_pb2.UNKNOWN_MEMBER_ID,
    ]
    assert list(classic.group.members) == [b]
    assert classic.group.state == PREPARING_REBALANCE


def test_a_static_member_that_misses_the_barrier_stays_for_the_next_generation() -> None:
    """Kafka drops only dynamic members that did not rejoin: a static one (perhaps
    restarting) keeps its place until its session ends."""
    classic = Classic()
    a, b = _static_pair(classic)
    c = classic.join_new(1_000)
    classic.heartbeat(a, 2, 1_000, "i-a")
    classic.join(_request(c), 1_000)
    classic.tick(1_000 + REBALANCE_MS)
    assert b not in classic.group.members, "the dynamic straggler is dropped"
    assert set(classic.group.members) == {a, c}
    assert classic.answer(c).generation == 3 and classic.answer(c).leader == c


def test_the_first_rebalance_waits_for_members_started_together() -> None:
    """group.initial.rebalance.delay.ms (3 s here): each new member during the delay extends
    it, by at most what is left of the rebalance timeout; then one generation holds all."""
    classic = Classic(initial_delay_ms=3_000)
    a = classic.join_new(0)
    b = classic.join_new(1_000)
    classic.tick(2_999)
    assert classic.groups.join_answer(G, (a, None)) is None
    classic.tick(3_000)  # b came: extended by min(3000, 5000 - 3000) ms
    assert classic.group.state == PREPARING_REBALANCE
    c = classic.join_new(4_000)
    classic.tick(4_999)
    assert classic.groups.join_answer(G, (c, None)) is None
    classic.tick(5_000)  # nothing of the rebalance timeout is left: no more waiting
    answers = [classic.answer(m) for m in (a, b, c)]
    assert {(x.error_code, x.generation) for x in answers} == {(common_pb2.NONE, 1)}
    assert len(answers[0].members) == 3


def test_the_first_rebalance_ends_after_one_delay_when_nobody_else_comes() -> None:
    classic = Classic(initial_delay_ms=3_000)
    a = classic.join_new(0)
    classic.tick(2_999)
    assert classic.heartbeat(a, 0, 2_999) == common_pb2.REBALANCE_IN_PROGRESS
    classic.tick(3_000)
    assert classic.answer(a).generation == 1
    b = classic.join_new(4_000)  # a later rebalance waits only for the known members
    classic.join(_request(a), 4_001)
    assert classic.answer(b).generation == 2


def test_seeded_simulation_keeps_the_invariants() -> None:
    seed = int(os.environ.get("PYKRAFT_SEED", random.randrange(1 << 30)))
    print(f"seed={seed} (replay with PYKRAFT_SEED={seed})")
    rng = random.Random(seed)
    classic = Classic(initial_delay_ms=rng.choice([0, 3_000]))
    known: list[str] = []
    generation_seen = 0
    now_ms = 0
    for _ in range(2_000):
        now_ms += rng.randrange(0, 3_000)
        action = rng.randrange(6)
        if action == 0 or not known:
            known.append(classic.join_new(now_ms))
        else:
            member = rng.choice(known)
            generation = classic.group.generation if G in classic.groups.groups else 0
            if action == 1:
                classic.join(_request(member), now_ms)
            elif action == 2:
                classic.sync(member, generation, now_ms, {m: m.encode() for m in known})
            elif action == 3:
                classic.heartbeat(member, generation, now_ms)
            elif action == 4:
                classic.leave(now_ms, (member, None))
            else:
                classic.tick(now_ms)
        group = classic.groups.groups.get(G)
        if group is None:
            assert generation_seen == 0, f"seed {seed}: a written group vanished"
            continue
        assert group.generation >= generation_seen, seed
        generation_seen = group.generation
        if group.state in (STABLE, COMPLETING_REBALANCE):
            assert group.leader in group.members, seed
        if group.state == STABLE:
            for member_id, stored in group.members.items():
                assert stored.assignment in (member_id.encode(), b""), seed
