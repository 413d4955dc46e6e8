"""The groups of one `__consumer_offsets` partition, and every decision on them (KIP-848).

A decision (`heartbeat`, `commit_offsets`, `delete_group`, the expirations) returns the records
to write and the answer; the caller appends the records to the partition and answers only once
every in-sync replica has them. Decisions emit records one by one and replay each at once
(`_emit`), so a decision sees its own earlier steps; persisted state changes only through
`replay`, which is also how a coordinator loads the partition. If the records cannot be
written, the caller must drop the shard and load it again from the log.

Pure: no I/O, no threads, no clocks (`now_ms` is monotonic, for session timers; `wall_ms` is
wall-clock time, stored with offsets). Not thread-safe: the caller serialises calls.

The member side of KIP-848 reconciliation, as `_reconcile` implements it: a member first gets
its assignment without the partitions it must give up (same epoch; it revokes them and says so
by heartbeating without them), then, at the target epoch, every partition of its target that
no other member still owns or revokes; the rest follow on later heartbeats as they are
released. So a partition never has two owners and members whose partitions stay never stop.
"""

from __future__ import annotations

import functools
import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Final, Generic, TypeVar

from google.protobuf.message import Message

from pykraft.broker.group.assignors import MemberSpec, assign
from pykraft.broker.group.config import GroupConfig
from pykraft.broker.group.consumer_group import (
    DEAD,
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
    GroupRecordValue,
    MemberMetadataValue,
    OffsetCommitValue,
    Partition,
    RecordKey,
    RecordType,
)
from pykraft.proto import common_pb2, group_pb2
from pykraft.server_common.errors import ApiError, fill_error

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Message)

PROTOCOL_TYPE: Final = "consumer"
# Regular expressions never match internal topics (those starting with "__"), as in Kafka.
_INTERNAL_PREFIX: Final = "__"


class GroupRequestError(ApiError):
    """A request refused as a whole, with Kafka's error code (`error_code`)."""


@dataclass(frozen=True, slots=True)
class Decision(Generic[R]):
    """The records a decision wrote (and replayed), and the answer to give once they are
    replicated."""

    records: list[GroupRecord]
    response: R


class GroupShard:
    """See the module docstring."""

    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.groups: dict[str, ConsumerGroup] = {}
        self._pending: list[GroupRecord] = []

    # --- state ---

    def replay(self, record: GroupRecord) -> None:
        group_id = record.key.group
        group = self.groups.get(group_id)
        if group is None:
            if record.value is None:
                return
            group = self.groups[group_id] = ConsumerGroup(group_id)
        group.replay(record)
        if group.is_gone:
            del self.groups[group_id]

    def loaded(self, now_ms: int, wall_ms: int) -> None:
        """Called once the partition is replayed: every member gets a full session, every
        empty group starts its offsets' retention from now."""
        for group in self.groups.values():
            group.empty_since_wall_ms = wall_ms
            for member in group.members.values():
                member.session_deadline_ms = now_ms + self.config.session_timeout_ms
                if member.current.revoking:
                    member.revocation_deadline_ms = now_ms + self._rebalance_timeout_ms(member)

    def _emit(self, key: RecordKey, value: GroupRecordValue | None) -> None:
        record = GroupRecord(key, value)
        self._pending.append(record)
        self.replay(record)

    def _take(self) -> list[GroupRecord]:
        records, self._pending = self._pending, []
        return records

    def _decision(self, response: R) -> Decision[R]:
        return Decision(self._take(), response)

    # --- ConsumerGroupHeartbeat ---

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
                group = self.groups[request.group_id]
                self._refresh_subscription_metadata(group, topics)
                self._update_target(group, topics)
                self._reconcile(group, member, _partition_set(request.owned_partitions), now_ms)
                member.session_deadline_ms = now_ms + self.config.session_timeout_ms
                self._fill_assignment(response, member)
        except GroupRequestError as error:
            fill_error(response.header, error)
        return self._decision(response)

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
        if assignor and assignor not in self.config.assignors:
            raise GroupRequestError(
                common_pb2.UNSUPPORTED_ASSIGNOR,
                f"no assignor {assignor!r}; this broker has {', '.join(self.config.assignors)}",
            )

    def _admit(self, request: group_pb2.ConsumerGroupHeartbeatRequest, client_host: str) -> Member:
        """The member the request speaks for, joined, replaced or checked; its metadata is
        brought up to date (a changed subscription bumps the group epoch)."""
        group = self.groups.get(request.group_id)
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
        return self.groups[request.group_id].members[member_id]

    def _update_member(
        self, request: group_pb2.ConsumerGroupHeartbeatRequest, client_host: str
    ) -> None:
        group = self.groups.get(request.group_id)
        member = None if group is None else group.members.get(request.member_id)
        old = None if member is None else member.metadata
        new = _member_metadata(request, client_host)
        if new == old:
            return
        self._emit(RecordKey(RecordType.MEMBER_METADATA, request.group_id, request.member_id), new)
        if old is None or _subscription(old) != _subscription(new):
            self._bump_epoch(self.groups[request.group_id])

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
        metadata = _member_metadata(request, client_host)
        self._emit(RecordKey(RecordType.MEMBER_METADATA, group_id, new_id), metadata)
        if holder.metadata is None or _subscription(holder.metadata) != _subscription(metadata):
            self._bump_epoch(group)
        self._emit(RecordKey(RecordType.TARGET_ASSIGNMENT_MEMBER, group_id, new_id), target)
        self._emit(RecordKey(RecordType.CURRENT_ASSIGNMENT, group_id, new_id), current)
        log.info("group %s: static member %s returned as %s", group_id, old_id, new_id)
        return group.members[new_id]

    def _leave(
        self,
        request: group_pb2.ConsumerGroupHeartbeatRequest,
        topics: Mapping[str, int],
        wall_ms: int,
    ) -> int:
        group = self.groups.get(request.group_id)
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
                self._emit(key, left)
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
            self._emit(RecordKey(kind, group.group_id, member_id), None)

    def _bump_epoch(self, group: ConsumerGroup) -> None:
        self._emit(RecordKey(RecordType.GROUP_METADATA, group.group_id), group.group_epoch + 1)

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
            self._emit(key, counts)
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
        targets = assign(self._assignor(group), specs, group.subscription_metadata)
        for member_id, partitions in sorted(targets.items()):
            if group.targets.get(member_id) != partitions:
                key = RecordKey(RecordType.TARGET_ASSIGNMENT_MEMBER, group.group_id, member_id)
                self._emit(key, partitions)
        key = RecordKey(RecordType.TARGET_ASSIGNMENT_METADATA, group.group_id)
        self._emit(key, group.group_epoch)

    def _assignor(self, group: ConsumerGroup) -> str:
        """The assignor most members ask for (ties: by name), else the broker's default."""
        wanted = Counter(
            member.metadata.server_assignor
            for member in group.members.values()
            if member.metadata and member.metadata.server_assignor
        )
        if not wanted:
            return self.config.assignors[0]
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
            self._emit(key, new)

    def _rebalance_timeout_ms(self, member: Member) -> int:
        if member.metadata is None or member.metadata.rebalance_timeout_ms <= 0:
            return self.config.session_timeout_ms
        return member.metadata.rebalance_timeout_ms

    def _fill_assignment(
        self, response: group_pb2.ConsumerGroupHeartbeatResponse, member: Member
    ) -> None:
        response.member_epoch = member.current.member_epoch
        response.heartbeat_interval_ms = self.config.heartbeat_interval_ms
        response.has_assignment = True
        response.assignment.extend(_topic_partitions(member.current.assigned))

    # --- timers ---

    def expire_members(
        self, topics: Mapping[str, int], now_ms: int, wall_ms: int
    ) -> list[GroupRecord]:
        """Removes members whose session ran out, or who did not revoke within their
        rebalance timeout."""
        for group in list(self.groups.values()):
            for member in list(group.members.values()):
                if now_ms >= member.session_deadline_ms:
                    reason = f"no heartbeat within {self.config.session_timeout_ms} ms"
                elif member.revocation_deadline_ms is not None and (
                    now_ms >= member.revocation_deadline_ms
                ):
                    reason = "it did not revoke its partitions within its rebalance timeout"
                else:
                    continue
                self.remove_member(group, member, topics, wall_ms, reason=reason)
        return self._take()

    def expire_offsets(self, wall_ms: int) -> list[GroupRecord]:
        """Drops the offsets of groups that stayed empty for offsets.retention.minutes (from
        the later of the commit and the moment the group became empty), and groups left with
        nothing."""
        retention_ms = self.config.offsets_retention_ms
        for group in list(self.groups.values()):
            if group.members:
                continue
            for (topic, partition), value in list(group.offsets.items()):
                since_ms = max(value.commit_timestamp_ms, group.empty_since_wall_ms)
                if wall_ms - since_ms >= retention_ms:
                    key = RecordKey(
                        RecordType.OFFSET_COMMIT, group.group_id, topic=topic, partition=partition
                    )
                    self._emit(key, None)
            if not group.offsets and group.group_id in self.groups:
                self._delete_records(group)
        return self._take()

    # --- offsets ---

    def commit_offsets(
        self, request: group_pb2.OffsetCommitRequest, *, topics: Mapping[str, int], wall_ms: int
    ) -> Decision[group_pb2.OffsetCommitResponse]:
        response = group_pb2.OffsetCommitResponse()
        try:
            self._check_committer(request)
        except GroupRequestError as error:
            fill_error(response.header, error)
            return self._decision(response)
        for topic in request.topics:
            topic_result = response.topics.add(topic=topic.topic)
            for item in topic.partitions:
                result = topic_result.partitions.add(partition=item.partition)
                refusal = self._offset_error(topic.topic, item, topics)
                if refusal is not None:
                    result.error_code = refusal[0]  # type: ignore[assignment]
                    result.error_message = refusal[1]
                    continue
                key = RecordKey(
                    RecordType.OFFSET_COMMIT,
                    request.group_id,
                    topic=topic.topic,
                    partition=item.partition,
                )
                value = OffsetCommitValue(
                    offset=item.committed_offset,
                    leader_epoch=item.committed_leader_epoch,
                    metadata=item.committed_metadata,
                    commit_timestamp_ms=wall_ms,
                )
                self._emit(key, value)
        return self._decision(response)

    def _check_committer(self, request: group_pb2.OffsetCommitRequest) -> None:
        """A member commits with its current epoch; a tool (no member id) only to a group
        without members."""
        if not request.group_id:
            raise GroupRequestError(common_pb2.INVALID_GROUP_ID, "the group id must not be empty")
        group = self.groups.get(request.group_id)
        members = {} if group is None else group.members
        if not request.member_id:
            if members:
                raise GroupRequestError(
                    common_pb2.UNKNOWN_MEMBER_ID,
                    f"group {request.group_id!r} has active members; only they may commit",
                )
            return
        member = members.get(request.member_id)
        if member is None:
            raise GroupRequestError(
                common_pb2.UNKNOWN_MEMBER_ID,
                f"member {request.member_id} is not in group {request.group_id!r} (its "
                "session may have expired and its partitions moved)",
            )
        if request.member_epoch != member.current.member_epoch:
            raise GroupRequestError(
                common_pb2.STALE_MEMBER_EPOCH,
                f"member epoch {request.member_epoch} is not the member's current epoch "
                f"{member.current.member_epoch}",
            )

    def _offset_error(
        self, topic: str, item: group_pb2.OffsetCommitPartition, topics: Mapping[str, int]
    ) -> tuple[int, str] | None:
        if not 0 <= item.partition < topics.get(topic, 0):
            return common_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{item.partition} does not exist"
        if item.committed_offset < 0:
            return common_pb2.INVALID_REQUEST, f"offset {item.committed_offset} is negative"
        size = len(item.committed_metadata.encode())
        if size > self.config.offset_metadata_max_bytes:
            return common_pb2.OFFSET_METADATA_TOO_LARGE, (
                f"metadata of {size} bytes exceeds offset.metadata.max.bytes="
                f"{self.config.offset_metadata_max_bytes}"
            )
        return None

    def fetch_offsets(self, request: group_pb2.OffsetFetchRequest) -> group_pb2.OffsetFetchResponse:
        group = self.groups.get(request.group_id)
        offsets = {} if group is None else group.offsets
        if request.topics:
            wanted = [(t.topic, p) for t in request.topics for p in t.partitions]
        else:
            wanted = sorted(offsets)
        response = group_pb2.OffsetFetchResponse()
        by_topic: dict[str, group_pb2.OffsetFetchTopic] = {}
        for topic, partition in wanted:
            if topic not in by_topic:
                by_topic[topic] = response.topics.add(topic=topic)
            value = offsets.get((topic, partition))
            by_topic[topic].partitions.add(
                partition=partition,
                committed_offset=-1 if value is None else value.offset,
                committed_leader_epoch=-1 if value is None else value.leader_epoch,
                metadata="" if value is None else value.metadata,
            )
        return response

    # --- administration ---

    def delete_group(self, group_id: str) -> Decision[group_pb2.DeleteGroupsResult]:
        result = group_pb2.DeleteGroupsResult(group_id=group_id)
        group = self.groups.get(group_id)
        if group is None:
            result.error_code = common_pb2.GROUP_ID_NOT_FOUND
            result.error_message = f"group {group_id!r} does not exist"
        elif group.members:
            result.error_code = common_pb2.NON_EMPTY_GROUP
            result.error_message = (
                f"group {group_id!r} has {len(group.members)} active members; stop them first"
            )
        else:
            self._delete_records(group)
        return self._decision(result)

    def _delete_records(self, group: ConsumerGroup) -> None:
        group_id = group.group_id
        for topic, partition in sorted(group.offsets):
            key = RecordKey(RecordType.OFFSET_COMMIT, group_id, topic=topic, partition=partition)
            self._emit(key, None)
        for kind in (
            RecordType.TARGET_ASSIGNMENT_METADATA,
            RecordType.SUBSCRIPTION_METADATA,
            RecordType.GROUP_METADATA,
        ):
            self._emit(RecordKey(kind, group_id), None)

    def list_groups(self, states: Iterable[str]) -> list[group_pb2.ListedGroup]:
        wanted = {state.lower() for state in states}
        return [
            group_pb2.ListedGroup(
                group_id=group.group_id, protocol_type=PROTOCOL_TYPE, group_state=group.state
            )
            for group in sorted(self.groups.values(), key=lambda g: g.group_id)
            if not wanted or group.state.lower() in wanted
        ]

    def describe(self, group_id: str) -> group_pb2.DescribedGroup:
        group = self.groups.get(group_id)
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
            assignor_name=self._assignor(group),
        )
        for member_id, member in sorted(group.members.items()):
            metadata = member.metadata or _member_metadata(
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
                assignment=_topic_partitions(member.current.assigned),
                target_assignment=_topic_partitions(group.targets.get(member_id, frozenset())),
            )
        return described


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


def _member_metadata(
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


def _topic_partitions(partitions: Iterable[Partition]) -> list[group_pb2.TopicPartitions]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [group_pb2.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()]
