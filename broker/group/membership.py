"""Membership and reconciliation of KIP-848 consumer groups: ConsumerGroupHeartbeat (join,
leave, fencing by member epoch), target assignments from the server-side assignors, and the
session and revocation timers that remove members.

The member side of KIP-848 reconciliation, as `_reconcile` implements it: a member first gets
its assignment without the partitions it must give up (same epoch; it revokes them and says so
by heartbeating without them), then, at the target epoch, every partition of its target that
no other member still owns or revokes; the rest follow on later heartbeats as they are
released. So a partition never has two owners and members whose partitions stay never stop.

Pure: time comes in as `now_ms` (monotonic, for session timers) and `wall_ms` (stored with the
group); records go out through the shard's `ShardState`.
"""

from __future__ import annotations

import functools
import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Final

from pykraft.broker.group.assignors import MemberSpec, assign
from pykraft.broker.group.consumer_group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    MEMBER_STABLE,
    STATIC_LEAVE_EPOCH,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    Member,
)
from pykraft.broker.group.records import (
    CurrentAssignmentValue,
    GroupRecord,
    MemberMetadataValue,
    Partition,
    RecordKey,
    RecordType,
)
from pykraft.broker.group.shard_state import Decision, GroupRequestError, ShardState
from pykraft.proto import common_pb2, group_pb2
from pykraft.server_common.errors import fill_error

log = logging.getLogger(__name__)

# Regular expressions never match internal topics (those starting with "__"), as in Kafka.
_INTERNAL_PREFIX: Final = "__"


class Membership:
    """The membership decisions on the groups of one shard."""

    def __init__(self, state: ShardState) -> None:
        self._state = state

    def start_sessions(self, now_ms: int) -> None:
        """After a load: every member gets a full session, and a member still revoking gets
        its full rebalance timeout."""
        for group in self._state.groups.values():
            for member in group.members.values():
                member.session_deadline_ms = now_ms + self._state.config.session_timeout_ms
                if member.current.revoking:
                    member.revocation_deadline_ms = now_ms + self._rebalance_timeout_ms(member)

    def heartbeat(
        self,
        request: group_pb2.ConsumerGroupHeartbeatRequest,
        *,
        client_host: str,
        topics: Mapping[str, int],
        now_ms: int,
        wall_ms: int,
    ) -> Decision[group_pb2.ConsumerGroupHeartbeatResponse]:
        """Joins, leaves or keeps a member and moves it toward its target assignment.
        `topics` is every topic's partition count, from the broker's metadata."""
        response = group_pb2.ConsumerGroupHeartbeatResponse(
            member_id=request.member_id, member_epoch=request.member_epoch
        )
        try:
            self._check_heartbeat(request)
            if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                response.member_epoch = self._leave(request, topics, wall_ms)
            else:
                member = self._admit(request, client_host)
                group = self._state.groups[request.group_id]
                self._refresh_subscription_metadata(group, topics)
                self._update_target(group, topics)
                self._reconcile(group, member, _partition_set(request.owned_partitions), now_ms)
                member.session_deadline_ms = now_ms + self._state.config.session_timeout_ms
                self._fill_assignment(response, member)
        except GroupRequestError as error:
            fill_error(response.header, error)
        return self._state.decision(response)

    def _check_heartbeat(self, request: group_pb2.ConsumerGroupHeartbeatRequest) -> None:
        if not request.group_id:
            raise GroupRequestError(common_pb2.INVALID_GROUP_ID, "the group id must not be empty")
        if not request.member_id:
            raise GroupRequestError(common_pb2.INVALID_REQUEST, "the member id must not be empty")
        if request.member_epoch < STATIC_LEAVE_EPOCH:
            raise GroupRequestError(
                common_pb2.INVALID_REQUEST, f"member epoch {request.member_epoch} is not valid"
            )
        names, regex = request.subscribed_topic_names, request.subscribed_topic_regex
        if names and regex:
            raise GroupRequestError(
                common_pb2.INVALID_REQUEST, "subscribe to topic names or to a regex, not both"
            )
        if request.member_epoch == JOIN_EPOCH:
            if not names and not regex:
                raise GroupRequestError(
                    common_pb2.INVALID_REQUEST, "a joining member must subscribe to something"
                )
            if request.rebalance_timeout_ms <= 0:
                raise GroupRequestError(
                    common_pb2.INVALID_REQUEST, "rebalance_timeout_ms must be positive"
                )
        if regex:
            _compiled(regex)
        assignor = request.server_assignor
        if assignor and assignor not in self._state.config.assignors:
            raise GroupRequestError(
                common_pb2.UNSUPPORTED_ASSIGNOR,
                f"no assignor {assignor!r}; this broker has "
                f"{', '.join(self._state.config.assignors)}",
            )

    def _admit(self, request: group_pb2.ConsumerGroupHeartbeatRequest, client_host: str) -> Member:
        """The member the request speaks for, joined, replaced or checked; its metadata is
        brought up to date (a changed subscription bumps the group epoch)."""
        group = self._state.groups.get(request.group_id)
        member_id = request.member_id
        if group is not None and member_id in group.replaced_members:
            raise GroupRequestError(
                common_pb2.FENCED_INSTANCE_ID,
                f"a new member joined with group.instance.id "
                f"{group.replaced_members[member_id]!r} and replaced member {member_id}",
            )
        member = None if group is None else group.members.get(member_id)
        if request.member_epoch != JOIN_EPOCH:
            if member is None:
                raise GroupRequestError(
                    common_pb2.UNKNOWN_MEMBER_ID,
                    f"member {member_id} is not in group {request.group_id!r} (its session "
                    "may have expired); rejoin with epoch 0",
                )
            _check_epoch(member, request)
        elif member is None and group is not None and request.instance_id:
            holder = group.member_by_instance(request.instance_id)
            if holder is not None:
                return self._replace(group, holder, request, client_host)
        self._update_member(request, client_host)
        return self._state.groups[request.group_id].members[member_id]

    def _update_member(
        self, request: group_pb2.ConsumerGroupHeartbeatRequest, client_host: str
    ) -> None:
        group = self._state.groups.get(request.group_id)
        member = None if group is None else group.members.get(request.member_id)
        old = None if member is None else member.metadata
        new = member_metadata(request, client_host)
        if new == old:
            return
        self._state.emit(
            RecordKey(RecordType.MEMBER_METADATA, request.group_id, request.member_id), new
        )
        if old is None or _subscription(old) != _subscription(new):
            self._bump_epoch(self._state.groups[request.group_id])

    def _replace(
        self,
        group: ConsumerGroup,
        holder: Member,
        request: group_pb2.ConsumerGroupHeartbeatRequest,
        client_host: str,
    ) -> Member:
        """A static member's return: the new member id takes over the old one's partitions,
        epoch and target, without a rebalance; the old id is fenced."""
        old_id, new_id = holder.member_id, request.member_id
        current, target = holder.current, group.targets.get(old_id, frozenset())
        if current.member_epoch == STATIC_LEAVE_EPOCH:
            current = replace(current, member_epoch=current.previous_member_epoch)
        self._remove_records(group, old_id)
        group.replaced_members[old_id] = holder.instance_id
        group_id = group.group_id
        metadata = member_metadata(request, client_host)
        self._state.emit(RecordKey(RecordType.MEMBER_METADATA, group_id, new_id), metadata)
        if holder.metadata is None or _subscription(holder.metadata) != _subscription(metadata):
            self._bump_epoch(group)
        self._state.emit(RecordKey(RecordType.TARGET_ASSIGNMENT_MEMBER, group_id, new_id), target)
        self._state.emit(RecordKey(RecordType.CURRENT_ASSIGNMENT, group_id, new_id), current)
        log.info("group %s: static member %s returned as %s", group_id, old_id, new_id)
        return group.members[new_id]

    def _leave(
        self,
        request: group_pb2.ConsumerGroupHeartbeatRequest,
        topics: Mapping[str, int],
        wall_ms: int,
    ) -> int:
        group = self._state.groups.get(request.group_id)
        member = None if group is None else group.members.get(request.member_id)
        if group is None or member is None:
            raise GroupRequestError(
                common_pb2.UNKNOWN_MEMBER_ID,
                f"member {request.member_id} is not in group {request.group_id!r}",
            )
        if request.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id:
            current = member.current
            if not member.left_static:
                left = replace(
                    current,
                    member_epoch=STATIC_LEAVE_EPOCH,
                    previous_member_epoch=current.member_epoch,
                )
                key = RecordKey(RecordType.CURRENT_ASSIGNMENT, group.group_id, member.member_id)
                self._state.emit(key, left)
            return STATIC_LEAVE_EPOCH
        self.remove_member(group, member, topics, wall_ms, reason="it left the group")
        return LEAVE_EPOCH

    def remove_member(
        self,
        group: ConsumerGroup,
        member: Member,
        topics: Mapping[str, int],
        wall_ms: int,
        *,
        reason: str,
    ) -> None:
        """Removes `member`; its partitions go to the others (group epoch bump)."""
        log.info("group %s: member %s removed: %s", group.group_id, member.member_id, reason)
        self._remove_records(group, member.member_id)
        self._bump_epoch(group)
        if not group.members:
            group.empty_since_wall_ms = wall_ms
        self._refresh_subscription_metadata(group, topics)
        self._update_target(group, topics)

    def _remove_records(self, group: ConsumerGroup, member_id: str) -> None:
        for kind in (
            RecordType.CURRENT_ASSIGNMENT,
            RecordType.TARGET_ASSIGNMENT_MEMBER,
            RecordType.MEMBER_METADATA,
        ):
            self._state.emit(RecordKey(kind, group.group_id, member_id), None)

    def _bump_epoch(self, group: ConsumerGroup) -> None:
        self._state.emit(
            RecordKey(RecordType.GROUP_METADATA, group.group_id), group.group_epoch + 1
        )

    def _refresh_subscription_metadata(
        self, group: ConsumerGroup, topics: Mapping[str, int]
    ) -> None:
        """Records the partition counts of the group's topics; a change bumps the epoch."""
        subscribed: set[str] = set()
        for member in group.members.values():
            subscribed |= _resolve(member.metadata, topics)
        counts = {topic: topics[topic] for topic in sorted(subscribed)}
        if counts != group.subscription_metadata:
            key = RecordKey(RecordType.SUBSCRIPTION_METADATA, group.group_id)
            self._state.emit(key, counts)
            self._bump_epoch(group)

    def _update_target(self, group: ConsumerGroup, topics: Mapping[str, int]) -> None:
        """A new target assignment when the group epoch moved past the last one's."""
        if group.group_epoch <= group.assignment_epoch:
            return
        specs = {
            member_id: MemberSpec(
                subscribed_topics=frozenset(_resolve(member.metadata, topics)),
                rack_id=member.metadata.rack_id if member.metadata else "",
                current=group.targets.get(member_id, frozenset()),
            )
            for member_id, member in group.members.items()
        }
        targets = assign(self.assignor_of(group), specs, group.subscription_metadata)
        for member_id, partitions in sorted(targets.items()):
            if group.targets.get(member_id) != partitions:
                key = RecordKey(RecordType.TARGET_ASSIGNMENT_MEMBER, group.group_id, member_id)
                self._state.emit(key, partitions)
        key = RecordKey(RecordType.TARGET_ASSIGNMENT_METADATA, group.group_id)
        self._state.emit(key, group.group_epoch)

    def assignor_of(self, group: ConsumerGroup) -> str:
        """The assignor most members ask for (ties: by name), else the broker's default."""
        wanted = Counter(
            member.metadata.server_assignor
            for member in group.members.values()
            if member.metadata and member.metadata.server_assignor
        )
        if not wanted:
            return self._state.config.assignors[0]
        return min(wanted, key=lambda name: (-wanted[name], name))

    def _reconcile(
        self, group: ConsumerGroup, member: Member, owned: frozenset[Partition], now_ms: int
    ) -> None:
        """One step of the member toward its target (see the module docstring)."""
        current = member.current
        target = group.targets.get(member.member_id, frozenset())
        # The member acknowledges a revocation by heartbeating without those partitions.
        still_revoking = current.revoking if current.revoking & owned else frozenset()
        to_revoke = (current.assigned - target) | still_revoking
        if to_revoke:
            new = replace(
                current,
                state=UNREVOKED_PARTITIONS,
                assigned=current.assigned & target,
                revoking=to_revoke,
            )
            if not current.revoking:
                member.revocation_deadline_ms = now_ms + self._rebalance_timeout_ms(member)
        else:
            member.revocation_deadline_ms = None
            holders = group.holders(excluding=member.member_id)
            wanted = target - current.assigned
            free = frozenset(p for p in wanted if p not in holders)
            epoch = group.assignment_epoch
            new = CurrentAssignmentValue(
                member_epoch=epoch,
                previous_member_epoch=(
                    current.member_epoch
                    if epoch != current.member_epoch
                    else current.previous_member_epoch
                ),
                state=MEMBER_STABLE if free == wanted else UNRELEASED_PARTITIONS,
                assigned=current.assigned | free,
                revoking=frozenset(),
            )
        if new != current:
            key = RecordKey(RecordType.CURRENT_ASSIGNMENT, group.group_id, member.member_id)
            self._state.emit(key, new)

    def _rebalance_timeout_ms(self, member: Member) -> int:
        if member.metadata is None or member.metadata.rebalance_timeout_ms <= 0:
            return self._state.config.session_timeout_ms
        return member.metadata.rebalance_timeout_ms

    def _fill_assignment(
        self, response: group_pb2.ConsumerGroupHeartbeatResponse, member: Member
    ) -> None:
        response.member_epoch = member.current.member_epoch
        response.heartbeat_interval_ms = self._state.config.heartbeat_interval_ms
        response.has_assignment = True
        response.assignment.extend(topic_partitions(member.current.assigned))

    def expire_members(
        self, topics: Mapping[str, int], now_ms: int, wall_ms: int
    ) -> list[GroupRecord]:
        """Removes members whose session ran out, or who did not revoke within their
        rebalance timeout."""
        for group in list(self._state.groups.values()):
            for member in list(group.members.values()):
                if now_ms >= member.session_deadline_ms:
                    reason = f"no heartbeat within {self._state.config.session_timeout_ms} ms"
                elif member.revocation_deadline_ms is not None and (
                    now_ms >= member.revocation_deadline_ms
                ):
                    reason = "it did not revoke its partitions within its rebalance timeout"
                else:
                    continue
                self.remove_member(group, member, topics, wall_ms, reason=reason)
        return self._state.take()


def _check_epoch(member: Member, request: group_pb2.ConsumerGroupHeartbeatRequest) -> None:
    """The request's epoch must be the member's, or the one before it when the member's
    owned partitions show it simply missed the answer that moved it on."""
    current = member.current
    epoch = request.member_epoch
    if epoch == current.member_epoch and not member.left_static:
        return
    owned = _partition_set(request.owned_partitions)
    if epoch == current.previous_member_epoch and owned <= current.assigned:
        return
    raise GroupRequestError(
        common_pb2.FENCED_MEMBER_EPOCH,
        f"member epoch {epoch} is behind the member's current epoch "
        f"{current.member_epoch}; rejoin with epoch 0",
    )


def member_metadata(
    request: group_pb2.ConsumerGroupHeartbeatRequest, client_host: str
) -> MemberMetadataValue:
    return MemberMetadataValue(
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        client_id=request.client_id,
        client_host=client_host,
        subscribed_topic_names=tuple(sorted(set(request.subscribed_topic_names))),
        subscribed_topic_regex=request.subscribed_topic_regex,
        server_assignor=request.server_assignor,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
    )


def _subscription(metadata: MemberMetadataValue) -> tuple[object, ...]:
    """What, when it changes, calls for a new target assignment."""
    return (
        metadata.subscribed_topic_names,
        metadata.subscribed_topic_regex,
        metadata.server_assignor,
    )


def _resolve(metadata: MemberMetadataValue | None, topics: Mapping[str, int]) -> set[str]:
    """The existing topics a member subscribes to."""
    if metadata is None:
        return set()
    if metadata.subscribed_topic_regex:
        pattern = _compiled(metadata.subscribed_topic_regex)
        return {
            topic
            for topic in topics
            if not topic.startswith(_INTERNAL_PREFIX) and pattern.fullmatch(topic)
        }
    return {topic for topic in metadata.subscribed_topic_names if topic in topics}


@functools.lru_cache(maxsize=256)
def _compiled(regex: str) -> re.Pattern[str]:
    try:
        return re.compile(regex)
    except re.error as error:
        raise GroupRequestError(
            common_pb2.INVALID_REGULAR_EXPRESSION, f"{regex!r} is not a valid regex: {error}"
        ) from None


def _partition_set(items: Iterable[group_pb2.TopicPartitions]) -> frozenset[Partition]:
    return frozenset((item.topic, p) for item in items for p in item.partitions)


def topic_partitions(partitions: Iterable[Partition]) -> list[group_pb2.TopicPartitions]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [group_pb2.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()]
