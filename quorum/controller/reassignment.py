"""Partition reassignment (KIP-455): AlterPartitionReassignments and ListPartitionReassignments.

A reassignment never leaves a partition without its data: the new replicas join first and the
old ones leave only once every target replica is in the ISR. Starting one writes a
PartitionChangeRecord whose `replicas` are the target followed by the replicas leaving, with
`adding_replicas` (the target's newcomers) and `removing_replicas` (the originals outside the
target). Brokers follow the union, so newcomers fetch from the leader like any follower and the
leader adds them to the ISR through AlterPartition once caught up. The AlterPartition that puts
the last target replica in the ISR also completes the reassignment in the same record
(`complete_reassignment`): replicas become the target, the leaving replicas leave the ISR and, if
the leader leaves, the first target replica in the ISR that can lead takes over.

Per partition the answer to AlterPartitionReassignments is NONE, UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REPLICA_ASSIGNMENT (repeated or unregistered brokers, or no in-sync replica would remain),
NO_REASSIGNMENT_IN_PROGRESS (a cancel of a partition not being reassigned) or INVALID_REQUEST
(the partition named again in the same request). A cancel (empty
target) puts the original replicas back, dropping the newcomers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pykraft.metadata_log.image import MetadataImage, PartitionRegistration
from pykraft.metadata_log.records import NO_LEADER, PartitionChangeRecord
from pykraft.proto import admin_pb2, common_pb2
from pykraft.quorum.controller.elections import leaders_allowed
from pykraft.quorum.controller.result import ControllerResult, OperationTooLarge, RecordBuffer
from pykraft.server_common.errors import ApiError, error_header, fill_error, ok_header

CanLead = Callable[[int], bool]


def _leader_among(
    partition: PartitionRegistration,
    candidates: Iterable[int],
    isr: tuple[int, ...],
    can_lead: CanLead,
) -> int | None:
    """None when the current leader stays (it is still in `isr`), else the first candidate in
    `isr` that can lead, else NO_LEADER."""
    if partition.leader in isr:
        return None
    return next((r for r in candidates if r in isr and can_lead(r)), NO_LEADER)


def _change_to(
    template: PartitionChangeRecord,
    partition: PartitionRegistration,
    replicas: tuple[int, ...],
    adding: tuple[int, ...],
    removing: tuple[int, ...],
    can_lead: CanLead,
) -> PartitionChangeRecord | ApiError:
    """`template` (the fields already changing, such as an ISR) extended to give the partition
    these replicas, completing the reassignment at once if every target replica is in the ISR."""
    isr = partition.isr if template.isr is None else template.isr
    target = tuple(r for r in replicas if r not in removing)
    if (adding or removing) and set(target) <= set(isr):
        replicas, adding, removing = target, (), ()
    new_isr = tuple(r for r in isr if r in replicas)
    if not new_isr:
        return ApiError(
            common_pb2.INVALID_REPLICA_ASSIGNMENT,
            f"no in-sync replica of {list(isr)} would remain among {list(replicas)}",
        )
    leader = _leader_among(partition, target, new_isr, can_lead)
    return PartitionChangeRecord(
        template.topic_id,
        template.partition_id,
        isr=None if new_isr == partition.isr else new_isr,
        leader=template.leader if leader is None else leader,
        replicas=None if replicas == partition.replicas else replicas,
        adding_replicas=None if adding == partition.adding_replicas else adding,
        removing_replicas=None if removing == partition.removing_replicas else removing,
    )


def complete_reassignment(
    image: MetadataImage, change: PartitionChangeRecord, partition: PartitionRegistration
) -> PartitionChangeRecord:
    """`change` (an ISR change of `partition`), extended to complete the partition's
    reassignment when it puts every target replica in the ISR; unchanged otherwise."""
    if not partition.reassigning:
        return change
    completed = _change_to(
        change,
        partition,
        partition.replicas,
        partition.adding_replicas,
        partition.removing_replicas,
        leaders_allowed(image),
    )
    return change if isinstance(completed, ApiError) else completed


def _reassign(
    image: MetadataImage,
    template: PartitionChangeRecord,
    partition: PartitionRegistration,
    target: tuple[int, ...],
) -> PartitionChangeRecord | ApiError:
    """The record starting (or replacing) a reassignment to `target`, or cancelling the one in
    progress when `target` is empty."""
    original = partition.original_replicas
    if not target:
        if not partition.reassigning:
            return ApiError(
                common_pb2.NO_REASSIGNMENT_IN_PROGRESS, "the partition is not being reassigned"
            )
        return _change_to(template, partition, original, (), (), leaders_allowed(image))
    unregistered = [b for b in target if image.cluster.broker(b) is None]
    if len(set(target)) != len(target) or unregistered:
        return ApiError(
            common_pb2.INVALID_REPLICA_ASSIGNMENT,
            f"replicas {list(target)} must be distinct registered brokers "
            f"(unregistered: {unregistered})",
        )
    adding = tuple(b for b in target if b not in original)
    removing = tuple(b for b in original if b not in target)
    return _change_to(
        template, partition, target + removing, adding, removing, leaders_allowed(image)
    )


def _is_noop(change: PartitionChangeRecord) -> bool:
    return change == PartitionChangeRecord(change.topic_id, change.partition_id)


def alter_partition_reassignments(
    image: MetadataImage, request: admin_pb2.AlterPartitionReassignmentsRequest
) -> ControllerResult[admin_pb2.AlterPartitionReassignmentsResponse]:
    """One result per requested partition (see the module docstring). Too many records fail
    the whole request."""
    response = admin_pb2.AlterPartitionReassignmentsResponse(header=ok_header())
    records = RecordBuffer()
    seen: set[tuple[str, int]] = set()
    try:
        for item in request.partitions:
            result = response.results.add(topic=item.topic, partition=item.partition)
            if (item.topic, item.partition) in seen:
                fill_error(result, ApiError(common_pb2.INVALID_REQUEST, "Partition named twice."))
                continue
            seen.add((item.topic, item.partition))
            topic = image.topics.get_by_name(item.topic)
            partition = topic.partitions.get(item.partition) if topic is not None else None
            if topic is None or partition is None:
                result.error_code = common_pb2.UNKNOWN_TOPIC_OR_PARTITION
                result.error_message = f"no partition {item.partition} of topic {item.topic!r}"
                continue
            template = PartitionChangeRecord(topic.topic_id, item.partition)
            outcome = _reassign(image, template, partition, tuple(item.replicas))
            if isinstance(outcome, ApiError):
                fill_error(result, outcome)
            elif not _is_noop(outcome):
                records.extend((outcome,))
    except OperationTooLarge as too_large:
        failed = admin_pb2.AlterPartitionReassignmentsResponse(header=error_header(too_large))
        return ControllerResult((), failed)
    return ControllerResult(records.freeze(), response)


def list_partition_reassignments(
    image: MetadataImage, request: admin_pb2.ListPartitionReassignmentsRequest
) -> admin_pb2.ListPartitionReassignmentsResponse:
    """Every partition being reassigned, of the named topics (none named: of every topic), by
    topic name then partition."""
    response = admin_pb2.ListPartitionReassignmentsResponse(header=ok_header())
    wanted = set(request.topics)
    for topic in sorted(image.topics.by_id.values(), key=lambda t: t.name):
        if wanted and topic.name not in wanted:
            continue
        for partition_id, partition in sorted(topic.partitions.items()):
            if partition.reassigning:
                response.reassignments.add(
                    topic=topic.name,
                    partition=partition_id,
                    replicas=partition.replicas,
                    adding_replicas=partition.adding_replicas,
                    removing_replicas=partition.removing_replicas,
                )
    return response
