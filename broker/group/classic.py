"""Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) as a pure state
machine: the groups of one `__consumer_offsets` shard that use it.

A group goes Empty -> PreparingRebalance (someone joined or left; the join barrier is up) ->
CompletingRebalance (every known member rejoined, or the rebalance timeout dropped those that
did not; the generation is bumped, the first member is the leader) -> Stable (the leader's
SyncGroup brought the assignments) and back. The leader computes the assignment client-side;
the coordinator only stores and hands out each member's bytes.

Calls never block: `join` and `sync` record the request, and `join_answer` / `sync_answer` say
whether the member's answer is ready (None: not yet). The caller waits between them (the
handler layer) and calls `tick(now_ms)` so rebalance and session timeouts fire.

Membership lives in memory only: pykraft's `__consumer_offsets` records describe KIP-848 groups,
so a classic group's generation and members are lost when the coordinator moves, and its
members rejoin (their next call gets UNKNOWN_MEMBER_ID). Committed offsets are records, as for
every group. Not thread-safe: the caller serialises calls, as for `GroupShard`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Final

from pykraft.proto import common_pb2

EMPTY: Final = "Empty"
PREPARING_REBALANCE: Final = "PreparingRebalance"
COMPLETING_REBALANCE: Final = "CompletingRebalance"
STABLE: Final = "Stable"
DEAD: Final = "Dead"

# Kafka's codes that pykraft's ErrorCode enum does not name (no gRPC call needs them).
INCONSISTENT_GROUP_PROTOCOL: Final = 23
MEMBER_ID_REQUIRED: Final = 79
# Kafka's group.min.session.timeout.ms and group.max.session.timeout.ms defaults.
SESSION_TIMEOUT_MS_MIN: Final = 6_000
SESSION_TIMEOUT_MS_MAX: Final = 1_800_000

Protocols = tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's preference order


@dataclass(frozen=True)
class JoinAnswer:
    """What a JoinGroup gets: on success the generation, the chosen protocol, the leader, the
    member's id and (for the leader only) every member's metadata for that protocol."""

    error_code: int
    member_id: str = ""
    generation: int = -1
    protocol_name: str = ""
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (member id, instance id, metadata)


@dataclass(frozen=True)
class SyncAnswer:
    error_code: int
    assignment: bytes = b""


@dataclass(eq=False)
class ClassicMember:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: Protocols
    last_heard_ms: int
    joining: bool = False  # rejoined during the current rebalance
    join_answer: JoinAnswer | None = None
    assignment: bytes = b""


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    protocol_type: str
    state: str = EMPTY
    generation: int = 0
    leader: str = ""
    protocol_name: str = ""
    members: dict[str, ClassicMember] = field(default_factory=dict)
    # Ids handed out with MEMBER_ID_REQUIRED, with the time they lapse unless used.
    pending_ids: dict[str, int] = field(default_factory=dict)
    rebalance_deadline_ms: int = 0

    def metadata(self, member: ClassicMember) -> bytes:
        return dict(member.protocols).get(self.protocol_name, b"")


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool  # JoinGroup v4+: a new member first gets its id


class ClassicGroups:
    """See the module docstring."""

    def __init__(self) -> None:
        self.groups: dict[str, ClassicGroup] = {}

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    # --- JoinGroup ---

    def join(self, request: JoinRequest, now_ms: int) -> tuple[str, JoinAnswer | None]:
        """Records a join: the member's id (the request's, or a new one) and an immediate
        answer (an error, MEMBER_ID_REQUIRED, or the current generation for a member whose
        rejoin changes nothing), or None: wait for `join_answer(group_id, member_id)`."""
        member_id = request.member_id
        refusal = _join_refusal(request, self.groups.get(request.group_id))
        if refusal is not None:
            return member_id, JoinAnswer(refusal, member_id=member_id)
        group = self.groups.setdefault(
            request.group_id, ClassicGroup(request.group_id, request.protocol_type)
        )
        if not member_id:
            member_id = f"{request.client_id or 'member'}-{uuid.uuid4()}"
            if request.require_known_member_id:
                group.pending_ids[member_id] = now_ms + request.session_timeout_ms
                return member_id, JoinAnswer(MEMBER_ID_REQUIRED, member_id=member_id)
        elif member_id not in group.members and group.pending_ids.pop(member_id, None) is None:
            return member_id, JoinAnswer(common_pb2.UNKNOWN_MEMBER_ID, member_id=member_id)
        member = group.members.get(member_id)
        if member is not None and _unchanged(group, member, request):
            member.last_heard_ms = now_ms
            return member_id, _generation_answer(group, member)
        self._admit(group, member_id, request, now_ms)
        self._maybe_complete_join(group, now_ms)
        return member_id, None

    def _admit(
        self, group: ClassicGroup, member_id: str, request: JoinRequest, now_ms: int
    ) -> None:
        if group.state != PREPARING_REBALANCE:
            _prepare_rebalance(group, now_ms)
        group.members[member_id] = ClassicMember(
            member_id,
            request.client_id,
            request.client_host,
            request.session_timeout_ms,
            request.rebalance_timeout_ms,
            request.protocols,
            now_ms,
            joining=True,
        )
        group.rebalance_deadline_ms = max(
            group.rebalance_deadline_ms, now_ms + request.rebalance_timeout_ms
        )

    def join_answer(self, group_id: str, member_id: str) -> JoinAnswer | None:
        """The member's JoinGroup answer once the barrier completed; UNKNOWN_MEMBER_ID if it was
        dropped meanwhile; None while the barrier is up."""
        member = self._member(group_id, member_id)
        if member is None:
            return JoinAnswer(common_pb2.UNKNOWN_MEMBER_ID, member_id=member_id)
        return member.join_answer

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state != PREPARING_REBALANCE:
            return
        if any(not m.joining for m in group.members.values()) or group.pending_ids:
            return
        group.generation += 1
        if not group.members:
            group.state, group.leader, group.protocol_name = EMPTY, "", ""
            return
        group.state = COMPLETING_REBALANCE
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
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
        member_id: str,
        generation: int,
        assignments: dict[str, bytes],
        now_ms: int,
    ) -> SyncAnswer | None:
        """Records a sync (the leader's carries every member's assignment); the answer, or
        None: wait for `sync_answer`."""
        group = self.groups.get(group_id)
        member = self._member(group_id, member_id)
        if group is None or member is None:
            return SyncAnswer(common_pb2.UNKNOWN_MEMBER_ID)
        if generation != group.generation:
            return SyncAnswer(common_pb2.ILLEGAL_GENERATION)
        member.last_heard_ms = now_ms
        if group.state == COMPLETING_REBALANCE and member_id == group.leader:
            for other_id, other in group.members.items():
                other.assignment = assignments.get(other_id, b"")
            group.state = STABLE
        return self.sync_answer(group_id, member_id, generation)

    def sync_answer(self, group_id: str, member_id: str, generation: int) -> SyncAnswer | None:
        group = self.groups.get(group_id)
        member = self._member(group_id, member_id)
        if group is None or member is None:
            return SyncAnswer(common_pb2.UNKNOWN_MEMBER_ID)
        if group.generation != generation or group.state == PREPARING_REBALANCE:
            return SyncAnswer(common_pb2.REBALANCE_IN_PROGRESS)
        if group.state == STABLE:
            return SyncAnswer(common_pb2.NONE, member.assignment)
        return None

    # --- Heartbeat, LeaveGroup, OffsetCommit ---

    def heartbeat(self, group_id: str, member_id: str, generation: int, now_ms: int) -> int:
        group = self.groups.get(group_id)
        member = self._member(group_id, member_id)
        if group is None or member is None:
            return common_pb2.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return common_pb2.ILLEGAL_GENERATION
        member.last_heard_ms = now_ms
        if group.state == PREPARING_REBALANCE:
            return common_pb2.REBALANCE_IN_PROGRESS
        return common_pb2.NONE

    def leave(self, group_id: str, member_id: str, now_ms: int) -> int:
        if self._member(group_id, member_id) is None:
            return common_pb2.UNKNOWN_MEMBER_ID
        self._remove(self.groups[group_id], member_id, now_ms)
        return common_pb2.NONE

    def commit_error(self, group_id: str, member_id: str, generation: int) -> int:
        """Whether a commit may go to a classic group: a member in its generation (not while
        its assignment is being decided), or a simple consumer (no member id, generation -1)
        while the group has no members. NONE for groups this protocol does not know."""
        group = self.groups.get(group_id)
        if group is None or (not member_id and generation < 0 and not group.members):
            return common_pb2.NONE
        if member_id not in group.members:
            return common_pb2.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return common_pb2.ILLEGAL_GENERATION
        if group.state == COMPLETING_REBALANCE:
            return common_pb2.REBALANCE_IN_PROGRESS
        return common_pb2.NONE

    # --- time ---

    def tick(self, now_ms: int) -> None:
        """Fires what is due: unused pending ids lapse, members silent past their session
        timeout leave, and a barrier past its rebalance timeout drops those who did not rejoin."""
        for group in list(self.groups.values()):
            for pending, lapse_ms in list(group.pending_ids.items()):
                if now_ms >= lapse_ms:
                    del group.pending_ids[pending]
            if group.state == PREPARING_REBALANCE and now_ms >= group.rebalance_deadline_ms:
                group.pending_ids.clear()
                for member_id in [m for m, v in group.members.items() if not v.joining]:
                    del group.members[member_id]
            for member in list(group.members.values()):
                waiting = group.state == PREPARING_REBALANCE and member.joining
                if not waiting and now_ms - member.last_heard_ms >= member.session_timeout_ms:
                    self._remove(group, member.member_id, now_ms)
            self._maybe_complete_join(group, now_ms)
            if group.state == EMPTY and not group.members and not group.pending_ids:
                del self.groups[group.group_id]

    def _remove(self, group: ClassicGroup, member_id: str, now_ms: int) -> None:
        del group.members[member_id]
        if group.state in (STABLE, COMPLETING_REBALANCE):
            _prepare_rebalance(group, now_ms)
        self._maybe_complete_join(group, now_ms)

    def _member(self, group_id: str, member_id: str) -> ClassicMember | None:
        group = self.groups.get(group_id)
        return None if group is None else group.members.get(member_id)


def _join_refusal(request: JoinRequest, group: ClassicGroup | None) -> int | None:
    if not request.group_id:
        return common_pb2.INVALID_GROUP_ID
    if not SESSION_TIMEOUT_MS_MIN <= request.session_timeout_ms <= SESSION_TIMEOUT_MS_MAX:
        return common_pb2.INVALID_SESSION_TIMEOUT
    if not request.protocol_type or not request.protocols:
        return INCONSISTENT_GROUP_PROTOCOL
    if group is None or not group.members:
        return None
    names = {name for name, _ in request.protocols}
    if request.protocol_type != group.protocol_type or not all(
        names & {name for name, _ in m.protocols}
        for m in group.members.values()
        if m.member_id != request.member_id
    ):
        return INCONSISTENT_GROUP_PROTOCOL
    return None


def _unchanged(group: ClassicGroup, member: ClassicMember, request: JoinRequest) -> bool:
    """A rejoin Kafka answers with the current generation, no rebalance: same protocols, from a
    follower of a settled group (a leader's rejoin always rebalances, to reassign)."""
    settled = group.state in (STABLE, COMPLETING_REBALANCE)
    leader = member.member_id == group.leader and group.state == STABLE
    return settled and not leader and member.protocols == request.protocols


def _prepare_rebalance(group: ClassicGroup, now_ms: int) -> None:
    group.state = PREPARING_REBALANCE
    group.rebalance_deadline_ms = now_ms + max(
        (m.rebalance_timeout_ms for m in group.members.values()), default=0
    )
    for member in group.members.values():
        member.joining = False
        member.join_answer = None


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
        members = tuple((m.member_id, None, group.metadata(m)) for m in group.members.values())
    return JoinAnswer(
        common_pb2.NONE,
        member_id=member.member_id,
        generation=group.generation,
        protocol_name=group.protocol_name,
        leader=group.leader,
        members=members,
    )
