"""The groups of one `__consumer_offsets` partition, and every decision on them (KIP-848).

A decision (`membership.heartbeat`, `offsets.commit`, `delete_group`, the expirations)
returns the records to write and the answer; the caller appends the records to the partition
and answers only once every in-sync replica has them. Decisions emit records one by one and
replay each at once (`ShardState.emit`), so a decision sees its own earlier steps; persisted
state changes only through `replay`, which is also how a coordinator loads the partition. If the
records cannot be written, the caller must drop the shard and load it again from the log.

`membership` (module `membership`: heartbeats, reconciliation, session timers), `offsets`
(module `committed_offsets`) and `classic` (module `classic`: Kafka's classic protocol) decide
on the same `ShardState`; this class adds loading and the administration calls (list,
describe, delete).

Pure: no I/O, no threads, no clocks (`now_ms` is monotonic, for session timers; `wall_ms` is
wall-clock time, stored with offsets). Not thread-safe: the caller serialises calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, TypeVar

from pykraft.broker.group.classic import ClassicGroups
from pykraft.broker.group.committed_offsets import CommittedOffsets
from pykraft.broker.group.config import GroupConfig
from pykraft.broker.group.consumer_group import DEAD, JOIN_EPOCH, ConsumerGroup
from pykraft.broker.group.membership import Membership, member_metadata, topic_partitions
from pykraft.broker.group.records import GroupRecord
from pykraft.broker.group.shard_state import Decision, ShardState
from pykraft.proto import common_pb2, group_pb2

PROTOCOL_TYPE: Final = "consumer"
T = TypeVar("T")


class GroupShard:
    """See the module docstring."""

    def __init__(self, config: GroupConfig) -> None:
        self._state = ShardState(config)
        self.membership = Membership(self._state)
        self.offsets = CommittedOffsets(self._state)
        self.classic = ClassicGroups(self._state)

    @property
    def config(self) -> GroupConfig:
        return self._state.config

    @property
    def groups(self) -> dict[str, ConsumerGroup]:
        return self._state.groups

    def replay(self, record: GroupRecord) -> None:
        self._state.replay(record)

    def loaded(self, now_ms: int, wall_ms: int) -> None:
        """Called once the partition is replayed: every member (classic ones too) gets a full
        session, every empty group starts its offsets' retention from now."""
        for group in self._state.groups.values():
            group.empty_since_wall_ms = wall_ms
        self.membership.start_sessions(now_ms)
        for classic in self._state.classic.values():
            for member in classic.members.values():
                member.last_heard_ms = now_ms

    def decision(self, response: T) -> Decision[T]:
        """`response` with the records written since the last decision (the classic
        protocol's, whose calls answer plain values)."""
        return self._state.decision(response)

    def expire(
        self, topics: dict[str, int], now_ms: int, wall_ms: int, *, offsets: bool
    ) -> list[GroupRecord]:
        """The timers' decision: classic groups' timers, KIP-848 sessions and rebalance
        timeouts, and (with `offsets`) the offsets of groups empty for too long."""
        self.classic.tick(now_ms, wall_ms)
        records = self.membership.expire_members(topics, now_ms, wall_ms)  # the tick's too
        if offsets:
            records += self.offsets.expire(wall_ms)
        return records

    def consumer_heartbeat(
        self,
        request: group_pb2.ConsumerGroupHeartbeatRequest,
        *,
        client_host: str,
        topics: dict[str, int],
        now_ms: int,
        wall_ms: int,
    ) -> Decision[group_pb2.ConsumerGroupHeartbeatResponse]:
        """`membership.heartbeat`; a member that joins takes over the id of an Empty classic
        group, which is deleted (its offsets stay), as Kafka converts such a group."""
        decision = self.membership.heartbeat(
            request, client_host=client_host, topics=topics, now_ms=now_ms, wall_ms=wall_ms
        )
        joined = request.member_epoch == JOIN_EPOCH
        if joined and decision.response.header.error_code == common_pb2.NONE:
            self.classic.drop_empty(request.group_id)
            return Decision(decision.records + self._state.take(), decision.response)
        return decision

    def delete_group(self, group_id: str) -> Decision[group_pb2.DeleteGroupsResult]:
        result = group_pb2.DeleteGroupsResult(group_id=group_id)
        group = self._state.groups.get(group_id)
        if self.classic.has_members(group_id):
            result.error_code = common_pb2.NON_EMPTY_GROUP
            result.error_message = f"classic group {group_id!r} has members; stop them first"
        elif group is None and group_id not in self._state.classic:
            result.error_code = common_pb2.GROUP_ID_NOT_FOUND
            result.error_message = f"group {group_id!r} does not exist"
        elif group is not None and group.members:
            result.error_code = common_pb2.NON_EMPTY_GROUP
            result.error_message = (
                f"group {group_id!r} has {len(group.members)} active members; stop them first"
            )
        else:
            self._state.delete_records(group_id)
        return self._state.decision(result)

    def list_groups(self, states: Iterable[str]) -> list[group_pb2.ListedGroup]:
        """KIP-848 groups and classic ones (a classic group's state wins for an id whose
        offsets make it a KIP-848 group too), sorted by id."""
        wanted = {state.lower() for state in states}
        listed = {
            group.group_id: (PROTOCOL_TYPE, group.state) for group in self._state.groups.values()
        }
        for classic in self._state.classic.values():
            listed[classic.group_id] = (classic.protocol_type, classic.state)
        return [
            group_pb2.ListedGroup(group_id=group_id, protocol_type=kind, group_state=state)
            for group_id, (kind, state) in sorted(listed.items())
            if not wanted or state.lower() in wanted
        ]

    def describe(self, group_id: str) -> group_pb2.DescribedGroup:
        group = self._state.groups.get(group_id)
        if group is None:
            return group_pb2.DescribedGroup(
                group_id=group_id,
                group_state=DEAD,
                error_code=common_pb2.GROUP_ID_NOT_FOUND,
                error_message=f"group {group_id!r} does not exist",
            )
        described = group_pb2.DescribedGroup(
            group_id=group_id,
            group_state=group.state,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=self.membership.assignor_of(group),
        )
        for member_id, member in sorted(group.members.items()):
            metadata = member.metadata or member_metadata(
                group_pb2.ConsumerGroupHeartbeatRequest(), ""
            )
            described.members.add(
                member_id=member_id,
                instance_id=metadata.instance_id,
                rack_id=metadata.rack_id,
                member_epoch=member.current.member_epoch,
                client_id=metadata.client_id,
                client_host=metadata.client_host,
                subscribed_topic_names=metadata.subscribed_topic_names,
                subscribed_topic_regex=metadata.subscribed_topic_regex,
                assignment=topic_partitions(member.current.assigned),
                target_assignment=topic_partitions(group.targets.get(member_id, frozenset())),
            )
        return described
