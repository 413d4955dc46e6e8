"""AlterPartition: a partition leader asks to shrink or expand its ISR (Kafka's KIP-497 rules).

The request is checked against the image, in Kafka's order: the broker's registration epoch, then
per partition the leader epoch (an older one means the sender was deposed: FENCED_LEADER_EPOCH;
a newer one means this image is behind: UNKNOWN_LEADER_EPOCH), that the sender leads it, the
partition epoch (a concurrent change won: INVALID_UPDATE_VERSION), and the new ISR: the leader
in it, only replicas, no repeats (INVALID_REQUEST), and only brokers that are registered, unfenced
and not shutting down, each with the broker epoch it is registered with now where the leader
names one (KIP-903: a fetch from an incarnation that has since restarted, and may have lost
unflushed records, cannot put the new one in the ISR) (INELIGIBLE_REPLICA). Each partition
succeeds or fails on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from pykraft.metadata_log.image import MetadataImage, PartitionRegistration, TopicImage
from pykraft.metadata_log.records import PartitionChangeRecord
from pykraft.proto import common_pb2, controller_pb2
from pykraft.quorum.controller.guards import check_broker_epoch, parse_uuid
from pykraft.quorum.controller.reassignment import complete_reassignment
from pykraft.quorum.controller.result import ControllerResult, OperationTooLarge, RecordBuffer
from pykraft.server_common.errors import ApiError, error_header, fill_error, ok_header

# A partition as it will be, and the record that makes it so (None when nothing changes).
_Outcome = tuple[PartitionRegistration, PartitionChangeRecord | None]


def _check_new_isr(
    image: MetadataImage,
    partition: PartitionRegistration,
    members: Sequence[controller_pb2.BrokerState],
) -> ApiError | None:
    new_isr = tuple(member.broker_id for member in members)
    if len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(partition.replicas):
        return ApiError(
            common_pb2.INVALID_REQUEST,
            f"ISR {list(new_isr)} must be distinct replicas of {list(partition.replicas)}.",
        )
    if partition.leader not in new_isr:
        return ApiError(
            common_pb2.INVALID_REQUEST,
            f"ISR {list(new_isr)} must include leader {partition.leader}.",
        )
    eligible = set(image.cluster.unfenced_broker_ids())
    ineligible = [broker_id for broker_id in new_isr if broker_id not in eligible]
    if ineligible:
        return ApiError(
            common_pb2.INELIGIBLE_REPLICA,
            f"Brokers {ineligible} are fenced, shutting down or unregistered and cannot be in the "
            "ISR.",
        )
    stale = [
        f"broker {member.broker_id} fetched with epoch {member.broker_epoch}, registered "
        f"as {registered.broker_epoch}"
        for member in members
        if member.broker_epoch != -1
        and (registered := image.cluster.broker(member.broker_id)) is not None
        and registered.broker_epoch != member.broker_epoch
    ]
    if stale:
        return ApiError(
            common_pb2.INELIGIBLE_REPLICA,
            f"Stale broker epochs cannot be in the ISR: {'; '.join(stale)}.",
        )
    return None


def _isr_change(
    image: MetadataImage,
    broker_id: int,
    topic: TopicImage,
    item: controller_pb2.AlterPartitionItem,
) -> _Outcome | ApiError:
    """The partition as it will be and the record that makes it so (None if the ISR is as asked)."""
    partition = topic.partitions.get(item.partition)
    if partition is None:
        return ApiError(
            common_pb2.UNKNOWN_TOPIC_OR_PARTITION,
            f"Topic {topic.name!r} has no partition {item.partition}.",
        )
    if item.leader_epoch != partition.leader_epoch:
        code = (
            common_pb2.FENCED_LEADER_EPOCH
            if item.leader_epoch < partition.leader_epoch
            else common_pb2.UNKNOWN_LEADER_EPOCH
        )
        return ApiError(
            code,
            f"Leader epoch {item.leader_epoch} does not match the current "
            f"{partition.leader_epoch}.",
        )
    if broker_id != partition.leader:
        return ApiError(
            common_pb2.NOT_LEADER_OR_FOLLOWER,
            f"Broker {broker_id} is not the leader; broker {partition.leader} is.",
        )
    if item.partition_epoch != partition.partition_epoch:
        return ApiError(
            common_pb2.INVALID_UPDATE_VERSION,
            f"Partition epoch {item.partition_epoch} does not match the current "
            f"{partition.partition_epoch}.",
        )
    error = _check_new_isr(image, partition, item.new_isr_with_epochs)
    if error is not None:
        return error
    new_isr = tuple(member.broker_id for member in item.new_isr_with_epochs)
    if new_isr == partition.isr:
        return partition, None
    change = PartitionChangeRecord(topic.topic_id, item.partition, isr=new_isr)
    change = complete_reassignment(image, change, partition)
    return partition.merge(change), change


def _item_outcome(
    image: MetadataImage,
    broker_id: int,
    topic: TopicImage | None,
    item: controller_pb2.AlterPartitionItem,
    seen: set[tuple[UUID, int]],
) -> _Outcome | ApiError:
    """`_isr_change` for one item, after the checks that span items; adds it to `seen`."""
    if topic is None:
        return ApiError(common_pb2.UNKNOWN_TOPIC_ID, "No topic has this id.")
    if (topic.topic_id, item.partition) in seen:
        return ApiError(common_pb2.INVALID_REQUEST, "Partition named more than once.")
    seen.add((topic.topic_id, item.partition))
    return _isr_change(image, broker_id, topic, item)


def alter_partition(
    image: MetadataImage, request: controller_pb2.AlterPartitionRequest
) -> ControllerResult[controller_pb2.AlterPartitionResponse]:
    """One result per requested partition, showing the partition as it will be after commit.

    A partition named twice in one request fails the second time with INVALID_REQUEST.
    """
    broker_error = check_broker_epoch(image, request.broker_id, request.broker_epoch)
    if broker_error is not None:
        return ControllerResult(
            (), controller_pb2.AlterPartitionResponse(header=error_header(broker_error))
        )
    response = controller_pb2.AlterPartitionResponse(header=ok_header())
    buffer = RecordBuffer()
    seen: set[tuple[UUID, int]] = set()
    try:
        for topic_item in request.topics:
            topic_id = parse_uuid(topic_item.topic_id)
            topic = None if topic_id is None else image.topics.get(topic_id)
            for item in topic_item.partitions:
                result = response.partitions.add(
                    topic_id=topic_item.topic_id, partition=item.partition
                )
                outcome = _item_outcome(image, request.broker_id, topic, item, seen)
                if isinstance(outcome, ApiError):
                    fill_error(result, outcome)
                    continue
                partition, change = outcome
                buffer.extend([] if change is None else [change])
                result.leader = partition.leader
                result.leader_epoch = partition.leader_epoch
                result.partition_epoch = partition.partition_epoch
                result.isr.extend(partition.isr)
    except OperationTooLarge as too_large:
        return ControllerResult(
            (), controller_pb2.AlterPartitionResponse(header=error_header(too_large))
        )
    return ControllerResult(buffer.freeze(), response)
