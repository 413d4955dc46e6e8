"""One classic group's state (Kafka's ClassicGroup and ClassicGroupMember), the checks Kafka
makes of a member's identity, and the group's record in `__consumer_offsets`.

What a rebalance settles is persisted, as Kafka does: the group's record (`value`) is written
when the leader's SyncGroup brings the assignments, when a static member takes a new member id
in a Stable group, and when the group empties; a coordinator that loads the partition rebuilds
the group from it (`loaded_group`): Stable with those members and assignments, or Empty. The
join barrier, pending member ids, answers waiting to be fetched and session timers live in
memory only: a loaded member's session starts when the load ends.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Final

from pykraft.broker.group.records import ClassicGroupValue, ClassicMemberValue
from pykraft.proto import common_pb2

EMPTY: Final = "Empty"
PREPARING_REBALANCE: Final = "PreparingRebalance"
COMPLETING_REBALANCE: Final = "CompletingRebalance"
STABLE: Final = "Stable"
DEAD: Final = "Dead"

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
    instance_id: str | None  # group.instance.id: a static member (KIP-345)
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
class InitialRebalance:
    """The first rebalance of an Empty group waits group.initial.rebalance.delay.ms, again while
    new members keep coming, up to the group's rebalance timeout (Kafka's
    tryCompleteInitialRebalanceElseSchedule), so that members started together land in one
    generation."""

    deadline_ms: int
    delay_ms: int
    remaining_ms: int
    new_member_added: bool = False


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
    initial: InitialRebalance | None = None
    state_since_wall_ms: int = -1  # wall clock of the last persisted state change

    def metadata(self, member: ClassicMember) -> bytes:
        return dict(member.protocols).get(self.protocol_name, b"")

    def static_member_id(self, instance_id: str) -> str | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member.member_id
        return None

    def member_error(self, member_id: str, instance_id: str | None) -> int:
        """Kafka's validateMember: a static member's instance id must map to this member id
        (FENCED_INSTANCE_ID when another id took it over), and the member must be known."""
        if instance_id is not None:
            current = self.static_member_id(instance_id)
            if current is None:
                return common_pb2.UNKNOWN_MEMBER_ID
            if current != member_id:
                return common_pb2.FENCED_INSTANCE_ID
        return common_pb2.NONE if member_id in self.members else common_pb2.UNKNOWN_MEMBER_ID

    def commit_error(self, member_id: str, instance_id: str | None, generation: int) -> int:
        """Kafka's validateOffsetCommit: a member of the current generation (not while its
        assignment is being decided), or a simple consumer (generation -1, no member id) while
        the group is Empty."""
        if generation < 0 and self.state == EMPTY:
            return common_pb2.NONE
        if generation >= 0 or member_id or instance_id is not None:
            error = self.member_error(member_id, instance_id)
            if error != common_pb2.NONE:
                return error
            if generation != self.generation:
                return common_pb2.ILLEGAL_GENERATION
        elif self.state != EMPTY:
            return common_pb2.UNKNOWN_MEMBER_ID
        if self.state == COMPLETING_REBALANCE:
            return common_pb2.REBALANCE_IN_PROGRESS
        return common_pb2.NONE

    def value(self) -> ClassicGroupValue:
        """The group's record: its generation, protocol, leader and members with the
        metadata of the chosen protocol and their assignments."""
        return ClassicGroupValue(
            protocol_type=self.protocol_type,
            generation=self.generation,
            protocol_name=self.protocol_name or None,
            leader=self.leader or None,
            state_timestamp_ms=self.state_since_wall_ms,
            members=tuple(
                ClassicMemberValue(
                    member_id=member.member_id,
                    instance_id=member.instance_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    rebalance_timeout_ms=member.rebalance_timeout_ms,
                    session_timeout_ms=member.session_timeout_ms,
                    subscription=self.metadata(member),
                    assignment=member.assignment,
                )
                for member in self.members.values()
            ),
        )


def loaded_group(group_id: str, value: ClassicGroupValue) -> ClassicGroup:
    """The group a record describes, as Kafka loads it: Stable with its members (who support
    the chosen protocol alone, with the stored metadata), or Empty without any. Sessions are
    started by the caller once the load ends (`last_heard_ms`)."""
    protocol_name = value.protocol_name or ""
    group = ClassicGroup(
        group_id,
        value.protocol_type,
        state=STABLE if value.members else EMPTY,
        generation=value.generation,
        leader=value.leader or "",
        protocol_name=protocol_name,
        state_since_wall_ms=value.state_timestamp_ms,
    )
    for member in value.members:
        group.members[member.member_id] = ClassicMember(
            member_id=member.member_id,
            instance_id=member.instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            session_timeout_ms=member.session_timeout_ms,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            protocols=((protocol_name, member.subscription),),
            last_heard_ms=0,
            assignment=member.assignment,
        )
    return group


@dataclass(frozen=True)
class DescribedClassicGroup:
    """What DescribeGroups shows of a classic group: its members as its record has them, with
    the protocol and their metadata (`subscription`) only once Stable, as Kafka does."""

    state: str
    protocol_type: str
    protocol_name: str
    members: tuple[ClassicMemberValue, ...]


def described(group: ClassicGroup) -> DescribedClassicGroup:
    members = group.value().members
    if group.state != STABLE:
        members = tuple(dataclasses.replace(m, subscription=b"") for m in members)
    protocol_name = group.protocol_name if group.state == STABLE else ""
    return DescribedClassicGroup(group.state, group.protocol_type, protocol_name, members)
