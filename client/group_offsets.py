"""OffsetCommit and OffsetFetch, as the consumer (`consumer/commits.py`) and AdminClient's group
offset methods both send them: building the requests, reading the answers, and the per-partition
errors `CoordinatorClient.call` raises (`item_errors`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from pykraft.client.types import OffsetAndMetadata, TopicPartition
from pykraft.proto import common_pb2, group_pb2

NO_LEADER_EPOCH = -1


def commit_request(
    group_id: str, member_id: str, epoch: int, offsets: Mapping[TopicPartition, OffsetAndMetadata]
) -> group_pb2.OffsetCommitRequest:
    """A member's commit (its id and epoch), or a tool's ("" and -1)."""
    by_topic: dict[str, list[group_pb2.OffsetCommitPartition]] = defaultdict(list)
    for tp, committed in sorted(offsets.items()):
        by_topic[tp.topic].append(
            group_pb2.OffsetCommitPartition(
                partition=tp.partition,
                committed_offset=committed.offset,
                committed_leader_epoch=(
                    NO_LEADER_EPOCH if committed.leader_epoch is None else committed.leader_epoch
                ),
                committed_metadata=committed.metadata,
            )
        )
    return group_pb2.OffsetCommitRequest(
        group_id=group_id,
        member_id=member_id,
        member_epoch=epoch,
        topics=[group_pb2.OffsetCommitTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )


def fetch_request(
    group_id: str, partitions: Iterable[TopicPartition]
) -> group_pb2.OffsetFetchRequest:
    """The committed offsets of `partitions`; none named means every one the group has."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in sorted(set(partitions)):
        by_topic[tp.topic].append(tp.partition)
    return group_pb2.OffsetFetchRequest(
        group_id=group_id,
        topics=[group_pb2.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )


def fetch_results(
    response: group_pb2.OffsetFetchResponse,
) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """Each answered partition's committed offset, None where the group has none."""
    return {
        TopicPartition(topic.topic, p.partition): None
        if p.committed_offset < 0
        else OffsetAndMetadata(
            p.committed_offset,
            p.metadata,
            None if p.committed_leader_epoch < 0 else p.committed_leader_epoch,
        )
        for topic in response.topics
        for p in topic.partitions
    }


def partition_errors(
    response: group_pb2.OffsetFetchResponse | group_pb2.OffsetCommitResponse,
) -> list[tuple[int, str]]:
    """(code, message) of every partition the coordinator refused, for `item_errors`."""
    return [
        (
            p.error_code,
            f"committed offset of {t.topic}-{p.partition}: {p.error_message or 'failed'}",
        )
        for t in response.topics
        for p in t.partitions
        if p.error_code != common_pb2.NONE
    ]
