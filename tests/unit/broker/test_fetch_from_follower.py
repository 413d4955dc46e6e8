"""Fetch from the nearest in-sync replica (KIP-392) on one broker: a follower serves a consumer
that carries a rack, only up to the high-water mark it learned (past it, the consumer waits;
past its log end, OFFSET_OUT_OF_RANGE; out of the ISR, NOT_LEADER_OR_FOLLOWER), and a leader
with the rack-aware selector answers a consumer in a follower's rack with that follower as its
preferred read replica, at once and with no records. Broker 1 follows orders-2 (led by 2) and
leads orders-1 (followed by 2); broker n is in rack-n."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.broker.controller_channel import monotonic_ms
from pykraft.broker.counters import CONSUMER_BYTES_OUT_TOTAL, REQUESTS_TOTAL
from pykraft.broker.partition import Partition
from pykraft.broker.replica_selector import RACK_AWARE_SELECTOR
from pykraft.metadata_log.records import BrokerRegistrationChangeRecord, PartitionChangeRecord
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import build_batch

from .images import ORDERS_ID
from .replica_harness import Harness, record_values

_LONG_POLL_MS = 5000


def _follower_of_orders_2(harness: Harness, values: list[bytes], high_watermark: int) -> None:
    """Broker 1 appends `values` to orders-2 as the leader's follower, a batch each, and
    learns the mark."""
    partition = harness.manager.partition("orders", 2)
    assert partition is not None and not partition.is_leader
    for value in values:
        batch = build_batch(
            [(1_000, None, value)], base_offset=partition.log_end_offset, partition_leader_epoch=0
        )
        partition.append_as_follower(batch, leader_high_watermark=high_watermark)


def test_a_follower_serves_a_consumer_with_a_rack_up_to_its_high_watermark(
    harness: Harness,
) -> None:
    _follower_of_orders_2(harness, [b"a", b"b", b"c"], high_watermark=2)
    fetched = harness.fetch({2: 0}, rack="rack-1")[2]
    assert fetched.error_code == common_pb2.NONE
    assert record_values(fetched.records) == [(0, b"a"), (1, b"b")]
    assert fetched.high_watermark == 2 and not fetched.HasField("preferred_read_replica")
    # Without a rack the consumer does not follow preferred replicas: leaders only, as before.
    assert harness.fetch({2: 0})[2].error_code == common_pb2.NOT_LEADER_OR_FOLLOWER
    # Past its log end it cannot tell: out of range, and the consumer goes back to the leader.
    assert harness.fetch({2: 4}, rack="")[2].error_code == common_pb2.OFFSET_OUT_OF_RANGE


def test_past_the_followers_mark_a_consumer_waits_until_the_mark_moves(
    harness: Harness,
) -> None:
    _follower_of_orders_2(harness, [b"a", b"b", b"c"], high_watermark=2)
    answers = []
    waiter = threading.Thread(
        target=lambda: answers.append(
            harness.fetch({2: 2}, rack="", wait_ms=_LONG_POLL_MS, min_bytes=1)[2]
        )
    )
    started = monotonic_ms()
    waiter.start()
    partition = harness.manager.partition("orders", 2)
    assert partition is not None
    partition.take_leader_high_watermark(3)  # from the leader's next answer
    waiter.join(timeout=_LONG_POLL_MS / 1000 + 5)
    assert answers and answers[0].error_code == common_pb2.NONE
    assert record_values(answers[0].records) == [(2, b"c")]
    assert monotonic_ms() - started < _LONG_POLL_MS // 2


def test_a_follower_out_of_the_isr_sends_consumers_back_to_the_leader(harness: Harness) -> None:
    _follower_of_orders_2(harness, [b"a"], high_watermark=1)
    harness.change(PartitionChangeRecord(ORDERS_ID, 2, isr=(2,)))
    refused = harness.fetch({2: 0}, rack="rack-1")[2]
    assert refused.error_code == common_pb2.NOT_LEADER_OR_FOLLOWER
    assert refused.current_leader.leader_id == 2


@pytest.fixture
def rack_aware(tmp_path: Path) -> Iterator[Harness]:
    """Broker 1 with RackAwareReplicaSelector; orders-1 holds 3 records, replicated to 2."""
    harness = Harness(tmp_path, replica_selector_class=RACK_AWARE_SELECTOR)
    harness.produce(1, [b"a", b"b", b"c"])
    harness.fetch({1: 3}, replica_id=2)
    yield harness
    harness.manager.close()


def _leader(harness: Harness) -> Partition:
    partition = harness.manager.partition("orders", 1)
    assert partition is not None and partition.is_leader
    return partition


def test_the_leader_names_the_consumers_rack_replica_at_once(rack_aware: Harness) -> None:
    started = monotonic_ms()
    redirected = rack_aware.fetch({1: 1}, rack="rack-2", wait_ms=_LONG_POLL_MS, min_bytes=1)[1]
    assert monotonic_ms() - started < _LONG_POLL_MS // 2
    assert redirected.error_code == common_pb2.NONE
    assert redirected.preferred_read_replica == 2 and redirected.records == b""
    assert redirected.high_watermark == 3


@pytest.mark.parametrize(
    ("why", "rack"),
    [("no rack", None), ("the leader's rack", "rack-1"), ("a rack with no replica", "rack-3")],
)
def test_the_leader_serves_consumers_outside_its_followers_racks(
    rack_aware: Harness, why: str, rack: str | None
) -> None:
    fetched = rack_aware.fetch({1: 0}, rack=rack)[1]
    assert not fetched.HasField("preferred_read_replica"), why
    assert [offset for offset, _ in record_values(fetched.records)] == [0, 1, 2]


def test_a_follower_out_of_the_isr_or_fenced_is_not_preferred(rack_aware: Harness) -> None:
    rack_aware.change(BrokerRegistrationChangeRecord(2, 2, fenced=True))
    assert not rack_aware.fetch({1: 0}, rack="rack-2")[1].HasField("preferred_read_replica")
    rack_aware.change(BrokerRegistrationChangeRecord(2, 2, fenced=False))
    assert rack_aware.fetch({1: 0}, rack="rack-2")[1].preferred_read_replica == 2
    rack_aware.change(PartitionChangeRecord(ORDERS_ID, 1, isr=(1,)))
    assert not rack_aware.fetch({1: 0}, rack="rack-2")[1].HasField("preferred_read_replica")


def test_a_follower_behind_the_fetch_offset_is_not_preferred(rack_aware: Harness) -> None:
    rack_aware.change(PartitionChangeRecord(ORDERS_ID, 1, isr=(1,)))  # so the mark moves on
    rack_aware.produce(1, [b"d", b"e"])
    rack_aware.change(PartitionChangeRecord(ORDERS_ID, 1, isr=(1, 2)))  # follower 2 still at 3
    assert _leader(rack_aware).high_watermark == 5
    behind = rack_aware.fetch({1: 4}, rack="rack-2")[1]
    assert not behind.HasField("preferred_read_replica")
    assert record_values(behind.records) == [(3, b"d"), (4, b"e")]  # the batch holding 4
    assert rack_aware.fetch({1: 3}, rack="rack-2")[1].preferred_read_replica == 2


def test_fetches_and_consumer_bytes_are_counted(rack_aware: Harness) -> None:
    fetched = rack_aware.fetch({1: 0}, rack="rack-1")[1]
    rack_aware.fetch({1: 0}, rack="rack-2")
    counters = rack_aware.manager.counters.snapshot()
    assert counters[REQUESTS_TOTAL, (("request", "FetchConsumer"),)] == 2
    assert counters[REQUESTS_TOTAL, (("request", "FetchFollower"),)] == 1  # the fixture's
    assert counters[CONSUMER_BYTES_OUT_TOTAL, (("topic", "orders"),)] == len(fetched.records)
