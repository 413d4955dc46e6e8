"""A consumer's Fetch naming its last fetched epoch gets the leader's diverging epoch, as a
follower's does (KIP-320), before its offset is checked against the high-water mark."""

from __future__ import annotations

from pykraft.broker.controller_channel import monotonic_ms
from pykraft.broker.fetch import handle_fetch
from pykraft.metadata_log.records import PartitionChangeRecord
from pykraft.proto import broker_pb2, common_pb2

from .images import ORDERS_ID
from .replica_harness import Harness


def _consumer_fetch(
    harness: Harness, offset: int, last_fetched_epoch: int
) -> broker_pb2.FetchPartitionResult:
    request = broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=0, max_bytes=1 << 20)
    request.topics.add(topic="orders").partitions.add(
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=offset,
        last_fetched_epoch=last_fetched_epoch,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    return handle_fetch(harness.manager, request, monotonic_ms).topics[0].partitions[0]


def test_a_consumer_past_the_leaders_epoch_end_gets_where_the_logs_part(
    harness: Harness,
) -> None:
    harness.produce(0, [b"a", b"b", b"c", b"d", b"e"])  # epoch 0, offsets 0..4
    # It read 0..7 in epoch 0 from a leader this one replaced uncleanly: they part at 5.
    diverged = _consumer_fetch(harness, 8, 0)
    assert diverged.error_code == common_pb2.NONE
    assert diverged.HasField("diverging_epoch") and diverged.records == b""
    assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (0, 5)
    # Without an epoch there is nothing to compare: past the high-water mark is out of range.
    assert _consumer_fetch(harness, 8, -1).error_code == common_pb2.OFFSET_OUT_OF_RANGE


def test_a_consumer_whose_log_is_a_prefix_reads_on(harness: Harness) -> None:
    harness.produce(0, [b"a", b"b", b"c"])  # epoch 0, offsets 0..2
    harness.change(PartitionChangeRecord(ORDERS_ID, 0, leader=1))  # epoch 1
    harness.produce(0, [b"d", b"e"])  # epoch 1, offsets 3..4
    for offset, epoch in ((3, 0), (1, 0), (5, 1), (4, 1)):
        fetched = _consumer_fetch(harness, offset, epoch)
        assert not fetched.HasField("diverging_epoch"), (offset, epoch)
        assert fetched.error_code == common_pb2.NONE
    assert _consumer_fetch(harness, 3, 0).records != b""
