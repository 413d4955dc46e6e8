"""Committed offsets against a fake coordinator over real gRPC: commit and committed, async
commits and their callbacks, the member epoch on commits and how commit errors surface."""

from __future__ import annotations

import threading

import pytest

from pykraft.client import Consumer, TopicPartition
from pykraft.client.errors import CommitFailedError, OffsetMetadataTooLargeError
from pykraft.client.types import OffsetAndMetadata
from pykraft.proto import common_pb2
from tests.unit.client.fake_coordinator import FakeCoordinator, running_group
from tests.unit.client.test_consumer_group import fill, group_consumer, member_id, poll_until

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def joined(consumer: Consumer, coordinator: FakeCoordinator) -> int:
    """Subscribes to "t", waits until the coordinator knows the consumer owns all of it;
    returns its epoch."""
    consumer.subscribe(["t"])
    poll_until([consumer], lambda _: consumer.assignment() == {T0, T1}, "the assignment")
    mid = member_id(consumer)
    poll_until([consumer], lambda _: coordinator.owned(mid) == {T0, T1}, "the acknowledgement")
    return coordinator.members[mid].epoch


def test_commit_and_committed_round_trip_with_the_member_epoch() -> None:
    with running_group({"t": 2}) as (cluster, coordinator), group_consumer(cluster) as consumer:
        epoch = joined(consumer, coordinator)
        consumer.commit({T0: OffsetAndMetadata(5, "meta", 3)})
        assert consumer.committed([T0, T1]) == {T0: OffsetAndMetadata(5, "meta", 3), T1: None}
        sent = coordinator.commits[-1]
        assert (sent.group_id, sent.member_id, sent.member_epoch) == (
            "g",
            member_id(consumer),
            epoch,
        )


def test_commit_without_offsets_commits_the_positions_poll_reached() -> None:
    with (
        running_group({"t": 2}) as (cluster, coordinator),
        group_consumer(cluster, auto_offset_reset="earliest") as consumer,
    ):
        joined(consumer, coordinator)
        fill(cluster, [T0], 4)
        records = poll_until([consumer], bool, "records", records_max=3)
        assert [r.offset for r in records] == [0, 1, 2]
        assert consumer.position(T1) == 0  # looked up by auto_offset_reset
        consumer.commit()
        assert consumer.committed([T0, T1]) == {
            T0: OffsetAndMetadata(3, "", 0),  # with the leader epoch of the batch read
            T1: OffsetAndMetadata(0),  # the reset position: no epoch known
        }


def test_a_manually_assigned_consumer_commits_without_a_member() -> None:
    with running_group({"t": 2}) as (cluster, coordinator):
        fill(cluster, [T0], 4)
        with group_consumer(cluster) as consumer:
            consumer.assign([T0])
            assert [r.offset for r in poll_until([consumer], bool, "records", 2)] == [0, 1]
            consumer.commit()
            sent = coordinator.commits[-1]
            assert (sent.member_id, sent.member_epoch) == ("", -1)
            assert coordinator.commit_offset(T0) == 2


def test_commit_async_callbacks_run_on_the_polling_thread_in_order() -> None:
    with running_group({"t": 2}) as (cluster, coordinator):
        calls: list[tuple[dict[TopicPartition, OffsetAndMetadata], object, str]] = []

        def callback(offsets: dict[TopicPartition, OffsetAndMetadata], error: object) -> None:
            calls.append((offsets, error, threading.current_thread().name))

        with group_consumer(cluster) as consumer:
            consumer.assign([T0])
            consumer.commit_async({T0: OffsetAndMetadata(1)}, callback)
            consumer.commit_async({T0: OffsetAndMetadata(2)}, callback)
            consumer.commit({T1: OffsetAndMetadata(7)})  # after the two: they have ended
            assert coordinator.commit_offset(T0) == 2
            assert [offsets for offsets, _, _ in calls] == [
                {T0: OffsetAndMetadata(1)},
                {T0: OffsetAndMetadata(2)},
            ]
            assert {(error, thread) for _, error, thread in calls} == {
                (None, threading.current_thread().name)
            }
            coordinator.commit_errors.append(common_pb2.UNKNOWN_MEMBER_ID)
            consumer.commit_async({T0: OffsetAndMetadata(3)}, callback)
            poll_until([consumer], lambda _: len(calls) == 3, "the failed commit's callback")
            assert isinstance(calls[2][1], CommitFailedError)
            assert coordinator.commit_offset(T0) == 2


def test_a_stale_member_epoch_is_retried_with_the_newer_epoch() -> None:
    with running_group({"t": 2}) as (cluster, coordinator), group_consumer(cluster) as consumer:
        epoch = joined(consumer, coordinator)
        before = len(coordinator.commits)
        coordinator.stale_next_commit = True
        consumer.commit({T0: OffsetAndMetadata(4)})
        epochs = [c.member_epoch for c in coordinator.commits[before:]]
        assert epochs[0] == epoch
        assert epochs[-1] == epoch + 1
        assert coordinator.commit_offset(T0) == 4


def test_a_stale_commit_of_partitions_no_longer_owned_fails() -> None:
    with (
        running_group({"t": 2, "u": 1}) as (cluster, coordinator),
        group_consumer(cluster) as consumer,
    ):
        joined(consumer, coordinator)
        coordinator.stale_next_commit = True
        with pytest.raises(CommitFailedError, match="gave up"):
            consumer.commit({TopicPartition("u", 0): OffsetAndMetadata(4)})


@pytest.mark.parametrize("code", [common_pb2.UNKNOWN_MEMBER_ID, common_pb2.FENCED_MEMBER_EPOCH])
def test_a_member_that_is_gone_cannot_commit(code: int) -> None:
    with running_group({"t": 2}) as (cluster, coordinator), group_consumer(cluster) as consumer:
        joined(consumer, coordinator)
        coordinator.commit_errors.append(code)
        with pytest.raises(CommitFailedError, match="no longer a member"):
            consumer.commit({T0: OffsetAndMetadata(1)})


def test_a_partition_error_is_raised_naming_the_partition() -> None:
    with running_group({"t": 2}) as (cluster, coordinator):
        coordinator.partition_commit_errors[T1] = common_pb2.OFFSET_METADATA_TOO_LARGE
        with group_consumer(cluster) as consumer:
            consumer.assign([T0, T1])
            offsets = {T0: OffsetAndMetadata(1), T1: OffsetAndMetadata(1, "x" * 5000)}
            with pytest.raises(OffsetMetadataTooLargeError, match="t-1"):
                consumer.commit(offsets)
            assert coordinator.commit_offset(T0) == 1


def test_commit_arguments_are_checked() -> None:
    with running_group({"t": 1}) as (cluster, _), group_consumer(cluster) as consumer:
        with pytest.raises(TypeError, match="OffsetAndMetadata"):
            consumer.commit({T0: 5})  # type: ignore[dict-item]
        with pytest.raises(TypeError, match="TopicPartition"):
            consumer.commit({"t": OffsetAndMetadata(1)})  # type: ignore[dict-item]
        with pytest.raises(ValueError, match="at least 0"):
            consumer.commit({T0: OffsetAndMetadata(-1)})
        with pytest.raises(ValueError, match="timeout_ms"):
            consumer.commit({T0: OffsetAndMetadata(1)}, timeout_ms=-1)
