"""Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) as a pure state
machine over the classic groups of one `__consumer_offsets` shard (`ShardState.classic`).

A group goes Empty -> PreparingRebalance (someone joined or left; the join barrier is up) ->
CompletingRebalance (every known member rejoined, or the rebalance timeout dropped the dynamic
members that did not; the generation is bumped, a member that rejoined leads) -> Stable (the
leader's SyncGroup brought the assignments) and back. The leader computes the assignment
client-side; the coordinator only stores and hands out each member's bytes. The first
rebalance of an Empty group waits group.initial.rebalance.delay.ms (`InitialRebalance`).

Static members (KIP-345) join with a group.instance.id: one that comes back with no member id
takes over its old member id's place (and assignment) without a rebalance while the group is
Stable and the chosen protocol stays; the old id is fenced (FENCED_INSTANCE_ID on whatever it
sends with that instance id). LeaveGroup may name members by instance id alone.

Calls never block: `join` and `sync` record the request, and `join_answer` / `sync_answer` say
whether the member's answer is ready (None: not yet). The caller waits between them (the
handler layer) and calls `tick` so the timers fire. Where Kafka persists a classic group, the
decision writes its record (`ShardState.write`, see `classic_group`); the caller appends what a
decision wrote before answering. Not thread-safe: the caller serialises calls, as for
`GroupShard`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Final

from pykraft.broker.group.classic_group import (
    COMPLETING_REBALANCE,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroup,
    ClassicMember,
    DescribedClassicGroup,
    InitialRebalance,
    JoinAnswer,
    Protocols,
    SyncAnswer,
    described,
)
from pykraft.broker.group.records import RecordKey, RecordType
from pykraft.broker.group.shard_state import ShardState
from pykraft.proto import common_pb2

# Kafka's codes that pykraft's ErrorCode enum does not name (no gRPC call needs them).
INCONSISTENT_GROUP_PROTOCOL: Final = 23
MEMBER_ID_REQUIRED: Final = 79
# Kafka's group.min.session.timeout.ms and group.max.session.timeout.ms defaults.
SESSION_TIMEOUT_MS_MIN: Final = 6_000
SESSION_TIMEOUT_MS_MAX: Final = 1_800_000

MemberIdentity = tuple[str, str | None]  # (member id, group.instance.id)


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    instance_id: str | None
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool  # JoinGroup v4+: a new dynamic member first gets its id


class ClassicGroups:
    """See the module docstring."""

    def __init__(self, state: ShardState) -> None:
        self._state = state

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self._state.classic

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def drop_empty(self, group_id: str) -> None:
        """Deletes the group if it is Empty: a KIP-848 group takes its id over, as Kafka
        converts an empty classic group (the committed offsets stay)."""
        group = self.groups.get(group_id)
        if group is not None and not group.members and not group.pending_ids:
            self._state.emit(RecordKey(RecordType.CLASSIC_GROUP, group_id), None)

    def describe(self, group_id: str) -> DescribedClassicGroup | None:
        group = self.groups.get(group_id)
        return None if group is None else described(group)

    # --- JoinGroup ---

    def join(
        self, request: JoinRequest, now_ms: int, wall_ms: int
    ) -> tuple[str, JoinAnswer | None]:
        """Records a join: the member's id (the request's, or a new one) and an immediate
        answer (an error, MEMBER_ID_REQUIRED, or the current generation for a member whose
        rejoin changes nothing), or None: wait for `join_answer`."""
        group = self.groups.get(request.group_id)
        refusal = _join_refusal(request, group)
        if refusal is not None:
            return request.member_id, JoinAnswer(refusal, member_id=request.member_id)
        if request.member_id:
            if group is None:
                return request.member_id, JoinAnswer(
                    common_pb2.UNKNOWN_MEMBER_ID, member_id=request.member_id
                )
            return request.member_id, self._join_known(group, request, now_ms, wall_ms)
        if group is None:
            group = self.groups[request.group_id] = ClassicGroup(
                request.group_id, request.protocol_type
            )
        if not group.members:
            group.protocol_type = request.protocol_type
        prefix = request.instance_id or request.client_id or "member"
        member_id = f"{prefix}-{uuid.uuid4()}"
        if request.instance_id is not None:
            old_id = group.static_member_id(request.instance_id)
            if old_id is not None:
                return member_id, self._replace_static(
                    group, old_id, member_id, request, now_ms, wall_ms
                )
        elif request.require_known_member_id:
            group.pending_ids[member_id] = now_ms + request.session_timeout_ms
            return member_id, JoinAnswer(MEMBER_ID_REQUIRED, member_id=member_id)
        self._admit(group, member_id, request, now_ms, wall_ms)
        return member_id, None

    def _join_known(
        self, group: ClassicGroup, request: JoinRequest, now_ms: int, wall_ms: int
    ) -> JoinAnswer | None:
        member_id = request.member_id
        if group.pending_ids.pop(member_id, None) is None:
            error = group.member_error(member_id, request.instance_id)
            if error != common_pb2.NONE:
                return JoinAnswer(error, member_id=member_id)
            member = group.members[member_id]
            if _unchanged(group, member, request):
                member.last_heard_ms = now_ms
                return _generation_answer(group, member)
        self._admit(group, member_id, request, now_ms, wall_ms)
        return None

    def _admit(
        self, group: ClassicGroup, member_id: str, request: JoinRequest, now_ms: int, wall_ms: int
    ) -> None:
        """Adds (or updates) a member that joins the barrier, raising it if it is down."""
        new = member_id not in group.members
        member = ClassicMember(
            member_id,
            request.instance_id,
            request.client_id,
            request.client_host,
            request.session_timeout_ms,
            request.rebalance_timeout_ms,
            request.protocols,
            now_ms,
        )
        group.members[member_id] = member
        self._join_barrier(group, member, now_ms, wall_ms, new=new)

    def _replace_static(
        self,
        group: ClassicGroup,
        old_id: str,
        new_id: str,
        request: JoinRequest,
        now_ms: int,
        wall_ms: int,
    ) -> JoinAnswer | None:
        """A static member back under a new member id takes over the old one's place (Kafka's
        updateStaticMemberThenRebalanceOrCompleteJoin). In a Stable group whose chosen
        protocol stays, nothing rebalances: the group is written with the new id and the
        member learns the current generation, with the leader as it was before, so a returning
        leader does not assign again but syncs for its stored assignment."""
        leader_before = group.leader
        member = group.members.pop(old_id)
        member.member_id = new_id
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.last_heard_ms = now_ms
        group.members[new_id] = member
        if group.leader == old_id:
            group.leader = new_id
        if group.state == STABLE and _choose_protocol(group) == group.protocol_name:
            self._state.write(group)
            return JoinAnswer(
                common_pb2.NONE,
                member_id=new_id,
                generation=group.generation,
                protocol_name=group.protocol_name,
                leader=leader_before,
            )
        self._join_barrier(group, member, now_ms, wall_ms, new=False)
        return None

    def _join_barrier(
        self, group: ClassicGroup, member: ClassicMember, now_ms: int, wall_ms: int, *, new: bool
    ) -> None:
        if group.state != PREPARING_REBALANCE:
            self._prepare_rebalance(group, now_ms)
        elif new and group.initial is not None:
            group.initial.new_member_added = True
        member.joining, member.join_answer = True, None
        group.rebalance_deadline_ms = max(
            group.rebalance_deadline_ms, now_ms + member.rebalance_timeout_ms
        )
        self._maybe_complete_join(group, now_ms, wall_ms)

    def join_answer(self, group_id: str, identity: MemberIdentity) -> JoinAnswer | None:
        """The member's JoinGroup answer once the barrier completed; its error if it was
        dropped or fenced meanwhile; None while the barrier is up."""
        group = self.groups.get(group_id)
        if group is None:
            return JoinAnswer(common_pb2.UNKNOWN_MEMBER_ID, member_id=identity[0])
        error = group.member_error(*identity)
        if error != common_pb2.NONE:
            return JoinAnswer(error, member_id=identity[0])
        return group.members[identity[0]].join_answer

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        """Raises the join barrier; the first one of an Empty group waits its initial delay."""
        initial = group.state == EMPTY
        group.state = PREPARING_REBALANCE
        timeout_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        group.rebalance_deadline_ms = now_ms + timeout_ms
        for member in group.members.values():
            member.joining = False
            member.join_answer = None
        delay_ms = self._state.config.initial_rebalance_delay_ms
        if initial and delay_ms > 0:
            group.initial = InitialRebalance(
                now_ms + delay_ms, delay_ms, max(timeout_ms - delay_ms, 0)
            )

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int, wall_ms: int) -> None:
        if group.state != PREPARING_REBALANCE or group.initial is not None:
            return
        if any(not m.joining for m in group.members.values()) or group.pending_ids:
            return
        self._complete_join(group, now_ms, wall_ms)

    def _complete_join(self, group: ClassicGroup, now_ms: int, wall_ms: int) -> None:
        """The next generation, led by a member that rejoined; an emptied group is written.
        While only static members that did not rejoin are left, the barrier stays up for
        another rebalance timeout (their sessions may still end)."""
        group.initial = None
        joined = [m.member_id for m in group.members.values() if m.joining]
        if group.members and not joined:
            timeout_ms = max(m.rebalance_timeout_ms for m in group.members.values())
            group.rebalance_deadline_ms = now_ms + timeout_ms
            return
        group.generation += 1
        if not group.members:
            group.state, group.leader, group.protocol_name = EMPTY, "", ""
            group.state_since_wall_ms = wall_ms
            self._state.write(group)
            return
        group.state = COMPLETING_REBALANCE
        if group.leader not in joined:
            group.leader = joined[0]
        group.protocol_name = _choose_protocol(group)
        for member in group.members.values():
            member.joining = False
            member.last_heard_ms = now_ms  # the session restarts with the new generation
            member.assignment = b""
            member.join_answer = _generation_answer(group, member)

    # --- SyncGroup ---

    def sync(
        self,
        group_id: str,
        identity: MemberIdentity,
        generation: int,
        assignments: dict[str, bytes],
        now_ms: int,
        wall_ms: int,
    ) -> SyncAnswer | None:
        """Records a sync; the leader's carries every member's assignment, which makes the
        group Stable and is written. The answer, or None: wait for `sync_answer`."""
        member_id = identity[0]
        group = self.groups.get(group_id)
        refusal = _sync_refusal(group, identity, generation)
        if refusal is not None:
            return refusal
        assert group is not None
        group.members[member_id].last_heard_ms = now_ms
        if group.state == COMPLETING_REBALANCE and member_id == group.leader:
            for other_id, other in group.members.items():
                other.assignment = assignments.get(other_id, b"")
            group.state, group.state_since_wall_ms = STABLE, wall_ms
            self._state.write(group)
        return self.sync_answer(group_id, identity, generation)

    def sync_answer(
        self, group_id: str, identity: MemberIdentity, generation: int
    ) -> SyncAnswer | None:
        group = self.groups.get(group_id)
        refusal = _sync_refusal(group, identity, generation)
        if refusal is not None:
            return refusal
        assert group is not None
        if group.state == PREPARING_REBALANCE:
            return SyncAnswer(common_pb2.REBALANCE_IN_PROGRESS)
        if group.state == STABLE:
            return SyncAnswer(common_pb2.NONE, group.members[identity[0]].assignment)
        return None

    # --- Heartbeat, LeaveGroup ---

    def heartbeat(
        self, group_id: str, identity: MemberIdentity, generation: int, now_ms: int
    ) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return common_pb2.UNKNOWN_MEMBER_ID
        error = group.member_error(*identity)
        if error != common_pb2.NONE:
            return error
        if generation != group.generation:
            return common_pb2.ILLEGAL_GENERATION
        group.members[identity[0]].last_heard_ms = now_ms
        if group.state == PREPARING_REBALANCE:
            return common_pb2.REBALANCE_IN_PROGRESS
        return common_pb2.NONE

    def leave(
        self, group_id: str, identities: list[MemberIdentity], now_ms: int, wall_ms: int
    ) -> list[int]:
        """Each member's answer. A member named by its instance id alone (no member id) is
        whichever member holds that instance id, as Kafka's admin removal does."""
        group = self.groups.get(group_id)
        if group is None:
            return [common_pb2.UNKNOWN_MEMBER_ID for _ in identities]
        return [self._leave(group, identity, now_ms, wall_ms) for identity in identities]

    def _leave(
        self, group: ClassicGroup, identity: MemberIdentity, now_ms: int, wall_ms: int
    ) -> int:
        member_id, instance_id = identity
        if not member_id:
            holder = None if instance_id is None else group.static_member_id(instance_id)
            if holder is None:
                return common_pb2.UNKNOWN_MEMBER_ID
            member_id = holder
        elif group.pending_ids.pop(member_id, None) is not None:
            self._maybe_complete_join(group, now_ms, wall_ms)
            return common_pb2.NONE
        else:
            error = group.member_error(member_id, instance_id)
            if error != common_pb2.NONE:
                return error
        self._remove(group, member_id, now_ms, wall_ms)
        return common_pb2.NONE

    # --- time ---

    def tick(self, now_ms: int, wall_ms: int) -> None:
        """Fires what is due: unused pending ids lapse, an initial delay ends or is extended,
        a barrier past its rebalance timeout drops the dynamic members who did not rejoin, and
        members silent past their session timeout leave."""
        for group in list(self.groups.values()):
            for pending, lapse_ms in list(group.pending_ids.items()):
                if now_ms >= lapse_ms:
                    del group.pending_ids[pending]
            if group.initial is not None:
                if now_ms >= group.initial.deadline_ms:
                    self._end_initial_delay(group, now_ms, wall_ms)
            elif group.state == PREPARING_REBALANCE and now_ms >= group.rebalance_deadline_ms:
                for member in list(group.members.values()):
                    if not member.joining and member.instance_id is None:
                        del group.members[member.member_id]
                self._complete_join(group, now_ms, wall_ms)
            for member in list(group.members.values()):
                waiting = group.state == PREPARING_REBALANCE and member.joining
                if not waiting and now_ms - member.last_heard_ms >= member.session_timeout_ms:
                    self._remove(group, member.member_id, now_ms, wall_ms)
            self._maybe_complete_join(group, now_ms, wall_ms)
            if group.generation == 0 and not (group.members or group.pending_ids):
                del self.groups[group.group_id]  # never completed a join: nothing was written

    def _end_initial_delay(self, group: ClassicGroup, now_ms: int, wall_ms: int) -> None:
        initial = group.initial
        assert initial is not None
        if initial.new_member_added and initial.remaining_ms > 0:
            delay_ms = min(self._state.config.initial_rebalance_delay_ms, initial.remaining_ms)
            remaining_ms = max(initial.remaining_ms - initial.delay_ms, 0)
            group.initial = InitialRebalance(now_ms + delay_ms, delay_ms, remaining_ms)
        else:
            self._complete_join(group, now_ms, wall_ms)

    def _remove(self, group: ClassicGroup, member_id: str, now_ms: int, wall_ms: int) -> None:
        del group.members[member_id]
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms)
        self._maybe_complete_join(group, now_ms, wall_ms)


def _join_refusal(request: JoinRequest, group: ClassicGroup | None) -> int | None:
    if not request.group_id:
        return common_pb2.INVALID_GROUP_ID
    if not SESSION_TIMEOUT_MS_MIN <= request.session_timeout_ms <= SESSION_TIMEOUT_MS_MAX:
        return common_pb2.INVALID_SESSION_TIMEOUT
    if not request.protocol_type or not request.protocols:
        return INCONSISTENT_GROUP_PROTOCOL
    others = [
        m for m in (group.members.values() if group else ()) if m.member_id != request.member_id
    ]
    if not others:
        return None
    assert group is not None
    common = set.intersection(*({name for name, _ in m.protocols} for m in others))
    if request.protocol_type != group.protocol_type or not common & dict(request.protocols).keys():
        return INCONSISTENT_GROUP_PROTOCOL
    return None


def _sync_refusal(
    group: ClassicGroup | None, identity: MemberIdentity, generation: int
) -> SyncAnswer | None:
    if group is None:
        return SyncAnswer(common_pb2.UNKNOWN_MEMBER_ID)
    error = group.member_error(*identity)
    if error != common_pb2.NONE:
        return SyncAnswer(error)
    if generation != group.generation:
        return SyncAnswer(common_pb2.ILLEGAL_GENERATION)
    return None


def _unchanged(group: ClassicGroup, member: ClassicMember, request: JoinRequest) -> bool:
    """A rejoin Kafka answers with the current generation, no rebalance: same protocols, from a
    follower of a settled group (a leader's rejoin always rebalances, to reassign)."""
    settled = group.state in (STABLE, COMPLETING_REBALANCE)
    leader = member.member_id == group.leader and group.state == STABLE
    return settled and not leader and member.protocols == request.protocols


def _choose_protocol(group: ClassicGroup) -> str:
    """The protocol every member supports that most members prefer most (Kafka's vote), ties
    going to the leader's order."""
    leader = group.members[group.leader]
    common = [
        name
        for name, _ in leader.protocols
        if all(name in dict(m.protocols) for m in group.members.values())
    ]
    votes = {name: 0 for name in common}
    for member in group.members.values():
        first = next(name for name, _ in member.protocols if name in votes)
        votes[first] += 1
    return max(common, key=lambda name: votes[name])


def _generation_answer(group: ClassicGroup, member: ClassicMember) -> JoinAnswer:
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    if member.member_id == group.leader:
        members = tuple(
            (m.member_id, m.instance_id, group.metadata(m)) for m in group.members.values()
        )
    return JoinAnswer(
        common_pb2.NONE,
        member_id=member.member_id,
        generation=group.generation,
        protocol_name=group.protocol_name,
        leader=group.leader,
        members=members,
    )
