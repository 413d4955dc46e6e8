"""Committed offsets of consumer groups: OffsetCommit (by a member in its current epoch, or
generation for a classic group, or by a tool while the group has no members), OffsetFetch, and
the expiry of offsets of groups that stayed empty for offsets.retention.minutes.

The committer is checked in the same decision that writes the offsets, so no rebalance can fall
between the check and the write (a fenced member's commit never lands).

Pure: `wall_ms` is wall-clock time, stored with each commit; records go out through the shard's
`ShardState`.
"""

from __future__ import annotations

from collections.abc import Mapping

from pykraft.broker.group.classic_group import EMPTY
from pykraft.broker.group.records import GroupRecord, OffsetCommitValue, RecordKey, RecordType
from pykraft.broker.group.shard_state import Decision, GroupRequestError, ShardState
from pykraft.proto import common_pb2, group_pb2
from pykraft.server_common.errors import ApiError, fill_error


class CommittedOffsets:
    """The offset decisions on the groups of one shard."""

    def __init__(self, state: ShardState) -> None:
        self._state = state

    def commit(
        self,
        request: group_pb2.OffsetCommitRequest,
        *,
        topics: Mapping[str, int],
        wall_ms: int,
        instance_id: str | None = None,
    ) -> Decision[group_pb2.OffsetCommitResponse]:
        """`instance_id`: a classic static member's group.instance.id (Kafka's OffsetCommit
        v7+); a classic group's commit carries its generation as `member_epoch`."""
        response = group_pb2.OffsetCommitResponse()
        try:
            self._check_committer(request, instance_id)
        except GroupRequestError as error:
            fill_error(response.header, error)
            return self._state.decision(response)
        for topic in request.topics:
            topic_result = response.topics.add(topic=topic.topic)
            for item in topic.partitions:
                result = topic_result.partitions.add(partition=item.partition)
                refusal = self._offset_error(topic.topic, item, topics)
                if refusal is not None:
                    fill_error(result, refusal)
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
                self._state.emit(key, value)
        return self._state.decision(response)

    def _check_committer(
        self, request: group_pb2.OffsetCommitRequest, instance_id: str | None
    ) -> None:
        """A member commits with its current epoch; a tool (no member id) only to a group
        without members."""
        if not request.group_id:
            raise GroupRequestError(common_pb2.INVALID_GROUP_ID, "the group id must not be empty")
        classic = self._state.classic.get(request.group_id)
        if classic is not None:
            error = classic.commit_error(request.member_id, instance_id, request.member_epoch)
            if error != common_pb2.NONE:
                raise GroupRequestError(
                    error,
                    f"member {request.member_id!r} of generation {request.member_epoch} may not "
                    f"commit to classic group {request.group_id!r} (now {classic.state} in "
                    f"generation {classic.generation})",
                )
            return
        group = self._state.groups.get(request.group_id)
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
    ) -> ApiError | None:
        if not 0 <= item.partition < topics.get(topic, 0):
            return ApiError(
                common_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{item.partition} does not exist"
            )
        if item.committed_offset < 0:
            return ApiError(
                common_pb2.INVALID_REQUEST, f"offset {item.committed_offset} is negative"
            )
        size = len(item.committed_metadata.encode())
        if size > self._state.config.offset_metadata_bytes_max:
            return ApiError(
                common_pb2.OFFSET_METADATA_TOO_LARGE,
                f"metadata of {size} bytes exceeds offset.metadata.max.bytes="
                f"{self._state.config.offset_metadata_bytes_max}",
            )
        return None

    def fetch(self, request: group_pb2.OffsetFetchRequest) -> group_pb2.OffsetFetchResponse:
        group = self._state.groups.get(request.group_id)
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

    def expire(self, wall_ms: int) -> list[GroupRecord]:
        """Drops the offsets of groups that stayed empty for offsets.retention.minutes (from
        the later of the commit and the moment the group became empty), and groups left with
        nothing: Empty classic groups without offsets too, as Kafka's cleanup does."""
        retention_ms = self._state.config.offsets_retention_ms
        for group in list(self._state.groups.values()):
            classic = self._state.classic.get(group.group_id)
            if group.members or (classic is not None and classic.state != EMPTY):
                continue
            empty_since_ms = max(
                group.empty_since_wall_ms, -1 if classic is None else classic.state_since_wall_ms
            )
            for (topic, partition), value in list(group.offsets.items()):
                since_ms = max(value.commit_timestamp_ms, empty_since_ms)
                if wall_ms - since_ms >= retention_ms:
                    key = RecordKey(
                        RecordType.OFFSET_COMMIT, group.group_id, topic=topic, partition=partition
                    )
                    self._state.emit(key, None)
            if not group.offsets and group.group_id in self._state.groups:
                self._state.delete_records(group.group_id)
        for classic in list(self._state.classic.values()):
            idle = classic.state == EMPTY and not classic.pending_ids
            if idle and classic.group_id not in self._state.groups:
                self._state.delete_records(classic.group_id)
        return self._state.take()
