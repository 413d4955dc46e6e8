"""One consumer group's state as the coordinator holds it: built only by replaying
`__consumer_offsets` records (`replay`), so a coordinator that loads the partition ends up with
exactly the state the previous one had written.

Besides the persisted state, each member has timers that live in memory only
(`session_deadline_ms`, `revocation_deadline_ms`): a coordinator that loads a group gives every
member a full session from the moment of loading, as Kafka's does.

States a user sees (Kafka's ConsumerGroupState for KIP-848 groups): Empty (no members),
Assigning (the group epoch moved past the target assignment's), Reconciling (some member has not
reached the target yet), Stable. Dead is what describe says of a group that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from pykraft.broker.group.records import (
    CurrentAssignmentValue,
    GroupRecord,
    MemberMetadataValue,
    OffsetCommitValue,
    Partition,
    RecordType,
)

EMPTY: Final = "Empty"
ASSIGNING: Final = "Assigning"
RECONCILING: Final = "Reconciling"
STABLE: Final = "Stable"
DEAD: Final = "Dead"
GROUP_STATES: Final = (EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD)

# A member's reconciliation state (Kafka's MemberState).
MEMBER_STABLE: Final = "stable"
UNREVOKED_PARTITIONS: Final = "unrevoked_partitions"
UNRELEASED_PARTITIONS: Final = "unreleased_partitions"

JOIN_EPOCH: Final = 0
LEAVE_EPOCH: Final = -1
STATIC_LEAVE_EPOCH: Final = -2

NO_ASSIGNMENT: Final = CurrentAssignmentValue(JOIN_EPOCH, -1, MEMBER_STABLE)


@dataclass(eq=False)
class Member:
    member_id: str
    metadata: MemberMetadataValue | None = None
    current: CurrentAssignmentValue = NO_ASSIGNMENT
    # In memory only (see the module docstring).
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None

    @property
    def instance_id(self) -> str:
        return self.metadata.instance_id if self.metadata else ""

    @property
    def left_static(self) -> bool:
        """A static member that left for now: its partitions wait for its return."""
        return self.current.member_epoch == STATIC_LEAVE_EPOCH

    @property
    def holds(self) -> frozenset[Partition]:
        """Partitions nobody else may get: those it owns and those it is still revoking."""
        return self.current.assigned | self.current.revoking


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    has_metadata: bool = False  # a GROUP_METADATA record exists (the group was ever joined)
    assignment_epoch: int = 0
    subscription_metadata: dict[str, int] = field(default_factory=dict)
    members: dict[str, Member] = field(default_factory=dict)
    targets: dict[str, frozenset[Partition]] = field(default_factory=dict)
    offsets: dict[Partition, OffsetCommitValue] = field(default_factory=dict)
    # In memory only: wall-clock time the group last became empty (offset expiry), and
    # member ids replaced by a static member's return, which get FENCED_INSTANCE_ID.
    empty_since_wall_ms: int = 0
    replaced_members: dict[str, str] = field(default_factory=dict)

    @property
    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        for member in self.members.values():
            current = member.current
            if member.left_static:
                continue
            if current.state != MEMBER_STABLE or current.member_epoch != self.assignment_epoch:
                return RECONCILING
        return STABLE

    @property
    def is_gone(self) -> bool:
        """Nothing of the group is left: the shard forgets it."""
        return not (self.members or self.offsets or self.has_metadata)

    def member_by_instance(self, instance_id: str) -> Member | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    def holders(self, excluding: str) -> dict[Partition, str]:
        """Partition -> the member (other than `excluding`) that owns or is revoking it."""
        return {
            partition: member_id
            for member_id, member in self.members.items()
            if member_id != excluding
            for partition in member.holds
        }

    def replay(self, record: GroupRecord) -> None:
        """Applies one record of this group (see `records`); the only mutator of persisted
        state."""
        key, value = record.key, record.value
        kind = key.type
        if kind is RecordType.OFFSET_COMMIT:
            partition = (key.topic, key.partition)
            if value is None:
                self.offsets.pop(partition, None)
            else:
                assert isinstance(value, OffsetCommitValue)
                self.offsets[partition] = value
        elif kind is RecordType.GROUP_METADATA:
            self.has_metadata = value is not None
            self.group_epoch = value if isinstance(value, int) else 0
        elif kind is RecordType.TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = value if isinstance(value, int) else 0
        elif kind is RecordType.SUBSCRIPTION_METADATA:
            self.subscription_metadata = dict(value) if isinstance(value, dict) else {}
        else:
            self._replay_member(record)

    def _replay_member(self, record: GroupRecord) -> None:
        key, value = record.key, record.value
        kind = key.type
        if kind is RecordType.TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.targets.pop(key.member, None)
            else:
                assert isinstance(value, frozenset)
                self.targets[key.member] = value
            return
        if value is None:
            if kind is RecordType.MEMBER_METADATA:
                self.members.pop(key.member, None)
            elif key.member in self.members:
                self.members[key.member].current = NO_ASSIGNMENT
            return
        member = self.members.setdefault(key.member, Member(key.member))
        if kind is RecordType.MEMBER_METADATA:
            assert isinstance(value, MemberMetadataValue)
            member.metadata = value
        else:
            assert kind is RecordType.CURRENT_ASSIGNMENT
            assert isinstance(value, CurrentAssignmentValue)
            member.current = value
