"""Partition reassignment (KIP-455): start, complete through AlterPartition, cancel, list, and
UnregisterBroker's guard that no replica depends on the broker."""

from __future__ import annotations

from uuid import UUID

from pykraft.metadata_log.image import MetadataImage, PartitionRegistration
from pykraft.metadata_log.records import PartitionChangeRecord
from pykraft.proto import admin_pb2, common_pb2, controller_pb2
from pykraft.quorum.controller import alter_partition
from pykraft.quorum.controller.cluster import unregister_broker
from pykraft.quorum.controller.reassignment import (
    alter_partition_reassignments,
    list_partition_reassignments,
)
from tests.unit.quorum.controller.conftest import (
    after,
    broker,
    broker_epoch,
    brokers,
    image_with,
    topic,
)

T = UUID(int=7)
# t-0: replicas 1, 2, 3 all in sync, 1 leads; broker 4 is new and empty, broker 5 fenced.
IMAGE = image_with(
    *brokers(1, 2, 3, 4), broker(5, fenced=True), *topic("t", T, [(1, 2, 3), (1, 2, 3)])
)


def _reassign(image: MetadataImage, replicas: list[int]) -> MetadataImage:
    request = admin_pb2.AlterPartitionReassignmentsRequest(
        partitions=[admin_pb2.ReassignablePartition(topic="t", partition=0, replicas=replicas)]
    )
    result = alter_partition_reassignments(image, request)
    assert [r.error_code for r in result.response.results] == [common_pb2.NONE]
    return after(image, result)


def _expand(image: MetadataImage, new_isr: tuple[int, ...]) -> MetadataImage:
    """The leader's AlterPartition putting `new_isr` in place."""
    partition = image.topics.by_id[T].partitions[0]
    request = controller_pb2.AlterPartitionRequest(
        broker_id=partition.leader,
        broker_epoch=broker_epoch(partition.leader),
        topics=[
            controller_pb2.AlterPartitionTopic(
                topic_id=str(T),
                partitions=[
                    controller_pb2.AlterPartitionItem(
                        partition=0,
                        leader_epoch=partition.leader_epoch,
                        partition_epoch=partition.partition_epoch,
                        new_isr_with_epochs=[
                            controller_pb2.BrokerState(broker_id=b, broker_epoch=broker_epoch(b))
                            for b in new_isr
                        ],
                    )
                ],
            )
        ],
    )
    result = alter_partition(image, request)
    assert result.response.partitions[0].error_code == common_pb2.NONE
    return after(image, result)


def _partition(image: MetadataImage) -> PartitionRegistration:
    return image.topics.by_id[T].partitions[0]


def test_new_replicas_join_before_the_old_ones_leave() -> None:
    started = _reassign(IMAGE, [4, 2, 3])
    moving = _partition(started)
    assert moving.replicas == (4, 2, 3, 1)
    assert (moving.adding_replicas, moving.removing_replicas) == ((4,), (1,))
    assert moving.isr == (1, 2, 3) and moving.leader == 1
    assert moving.target_replicas == (4, 2, 3)
    listed = list_partition_reassignments(started, admin_pb2.ListPartitionReassignmentsRequest())
    assert [(r.topic, list(r.adding_replicas)) for r in listed.reassignments] == [("t", [4])]

    done = _partition(_expand(started, (1, 2, 3, 4)))
    assert done.replicas == (4, 2, 3) and done.isr == (2, 3, 4)
    assert not done.reassigning
    assert done.leader == 4, "the leaving leader hands over to the first target replica in the ISR"
    assert done.leader_epoch == moving.leader_epoch + 1


def test_an_isr_change_that_leaves_a_newcomer_out_does_not_complete() -> None:
    started = _reassign(IMAGE, [4, 2, 3])
    shrunk = _partition(_expand(started, (1, 2)))
    assert shrunk.reassigning and shrunk.isr == (1, 2) and shrunk.replicas == (4, 2, 3, 1)


def test_a_target_already_in_sync_completes_at_once() -> None:
    shrunk = _partition(_reassign(IMAGE, [3, 2]))
    assert shrunk.replicas == (3, 2) and shrunk.isr == (2, 3) and not shrunk.reassigning
    assert shrunk.leader == 3


def test_cancel_puts_the_original_replicas_back() -> None:
    started = _reassign(IMAGE, [4, 2, 3])
    cancelled = _partition(_reassign(started, []))
    # As in Kafka, the originals come back in their order within the moving replica list.
    assert cancelled.replicas == (2, 3, 1) and not cancelled.reassigning
    assert cancelled.leader == 1 and cancelled.isr == (1, 2, 3)


def test_a_new_target_replaces_the_reassignment_in_progress() -> None:
    started = _reassign(IMAGE, [4, 2, 3])
    replaced = _partition(_reassign(started, [1, 4, 5]))
    assert replaced.replicas == (1, 4, 5, 2, 3)
    assert (replaced.adding_replicas, replaced.removing_replicas) == ((4, 5), (2, 3))


def _codes(*items: admin_pb2.ReassignablePartition) -> list[int]:
    """Each item's answer, asserting the request wrote nothing."""
    request = admin_pb2.AlterPartitionReassignmentsRequest(partitions=items)
    result = alter_partition_reassignments(IMAGE, request)
    assert result.records == ()
    return [r.error_code for r in result.response.results]


def test_refusals_are_per_partition_and_write_nothing() -> None:
    def item(partition: int, *replicas: int) -> admin_pb2.ReassignablePartition:
        return admin_pb2.ReassignablePartition(topic="t", partition=partition, replicas=replicas)

    assert _codes(item(0, 1, 1)) == [common_pb2.INVALID_REPLICA_ASSIGNMENT]
    assert _codes(item(0, 1, 9)) == [common_pb2.INVALID_REPLICA_ASSIGNMENT]
    assert _codes(item(0)) == [common_pb2.NO_REASSIGNMENT_IN_PROGRESS]
    assert _codes(item(3, 1)) == [common_pb2.UNKNOWN_TOPIC_OR_PARTITION]
    assert _codes(item(1, 1, 2, 3), item(1, 1, 2, 4)) == [
        common_pb2.NONE,  # t-1 already has these replicas: nothing to write
        common_pb2.INVALID_REQUEST,
    ]


def test_a_shrink_to_a_replica_out_of_sync_waits_for_it() -> None:
    image = image_with(
        *brokers(1, 2, 3, 4), *topic("t", T, [PartitionRegistration((1, 2), (1,), 1, 0, 0)])
    )
    waiting = _partition(_reassign(image, [2]))
    assert waiting.replicas == (2, 1) and waiting.removing_replicas == (1,)
    assert waiting.leader == 1, "the only in-sync replica keeps leading"
    done = _partition(_expand(_reassign(image, [2]), (1, 2)))
    assert (done.replicas, done.isr, done.leader) == ((2,), (2,), 2)


def test_a_cancel_that_would_leave_no_in_sync_replica_is_refused() -> None:
    moving = PartitionRegistration(
        (4, 1), (4,), 4, 3, 3, adding_replicas=(4,), removing_replicas=(1,)
    )
    image = image_with(*brokers(1, 2, 3, 4), *topic("t", T, [moving]))
    request = admin_pb2.AlterPartitionReassignmentsRequest(
        partitions=[admin_pb2.ReassignablePartition(topic="t", partition=0)]
    )
    result = alter_partition_reassignments(image, request)
    assert result.response.results[0].error_code == common_pb2.INVALID_REPLICA_ASSIGNMENT
    assert result.records == ()


def test_unregister_refuses_a_running_broker_and_one_hosting_replicas() -> None:
    def code(image: MetadataImage, broker_id: int) -> int:
        request = admin_pb2.UnregisterBrokerRequest(broker_id=broker_id)
        return unregister_broker(image, request).response.header.error_code

    fenced_host = image_with(
        *brokers(1, 2), broker(3, fenced=True), *topic("t", T, [(1, 3), (1, 2)])
    )
    assert code(fenced_host, 9) == common_pb2.BROKER_ID_NOT_REGISTERED
    assert code(fenced_host, 2) == common_pb2.INVALID_REQUEST
    assert code(fenced_host, 3) == common_pb2.INVALID_REQUEST
    result = unregister_broker(IMAGE, admin_pb2.UnregisterBrokerRequest(broker_id=5))
    assert result.response.header.error_code == common_pb2.NONE
    assert after(IMAGE, result).cluster.broker(5) is None


def test_a_plain_isr_change_is_unaffected() -> None:
    expanded = _expand(
        image_with(
            *brokers(1, 2, 3), *topic("t", T, [PartitionRegistration((1, 2, 3), (1,), 1, 0, 0)])
        ),
        (1, 2),
    )
    assert _partition(expanded) == PartitionRegistration((1, 2, 3), (1, 2), 1, 0, 1)
    assert PartitionChangeRecord(T, 0).adding_replicas is None
