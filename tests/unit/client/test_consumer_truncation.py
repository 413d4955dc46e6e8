"""Log truncation after an unclean election (KIP-320), against in-process fake brokers.

The consumer reads offsets 0..9, all written in leader epoch 0. Then the log is cut at 6 (the
new leader, elected uncleanly, never had 6..9), leadership moves (epoch 1) and six other
records take offsets 6..11. Reading on at offset 10 would hand out two records of the other
history under offsets the consumer believes it has moved past. Instead the consumer sends the
epoch of its last batch with each Fetch, the leader answers where their logs part (epoch 0
ends at 6), and, as Kafka's consumer does, it resets to 6 when auto_offset_reset has a policy,
or raises LogTruncationError (an OffsetOutOfRangeError) with "none".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pykraft.client import (
    Consumer,
    LogTruncationError,
    OffsetAndMetadata,
    OffsetOutOfRangeError,
    TopicPartition,
)
from tests.unit.client.fake_broker import FakeCluster, running
from tests.unit.client.test_consumer import poll_until
from tests.waiting import wait_until

T0 = TopicPartition("t", 0)
OLD = [b"a%d" % i for i in range(10)]
NEW = [b"b%d" % i for i in range(6, 12)]


def unclean_election(cluster: FakeCluster) -> None:
    """Broker 2 leads in epoch 1 with offsets 0..5 only, then takes six other records."""
    cluster.truncate(T0, 6)
    cluster.move_leader(T0, 2)
    cluster.append(T0, NEW[:3])
    cluster.append(T0, NEW[3:])


def fill(cluster: FakeCluster) -> None:
    cluster.append(T0, OLD[:6])
    cluster.append(T0, OLD[6:])


@contextmanager
def assigned_at_zero(policy: str) -> Iterator[tuple[FakeCluster, Consumer]]:
    """Two fake brokers holding OLD at offsets 0..9 (epoch 0), and a consumer with
    auto_offset_reset `policy` assigned to the partition at offset 0."""
    with running({"t": 1}, brokers=2) as cluster:
        fill(cluster)
        with Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset=policy) as consumer:
            consumer.assign([T0])
            consumer.seek(T0, 0)
            yield cluster, consumer


@pytest.mark.parametrize("policy", ["earliest", "latest"])
def test_a_truncated_position_resets_to_where_the_logs_part(policy: str) -> None:
    with assigned_at_zero(policy) as (cluster, consumer):
        assert [r.value for r in poll_until(consumer, 10)] == OLD
        unclean_election(cluster)
        records = poll_until(consumer, 6)
        assert [(r.offset, r.value) for r in records] == list(zip(range(6, 12), NEW, strict=True))
        assert consumer.position(T0) == 12
    assert (T0, 0, (0, 6)) in cluster.diverging_answers


def test_with_no_reset_policy_truncation_raises_until_a_seek() -> None:
    with assigned_at_zero("none") as (cluster, consumer):
        assert [r.value for r in poll_until(consumer, 10)] == OLD
        unclean_election(cluster)
        with pytest.raises(LogTruncationError) as raised:
            poll_until(consumer, 1)
        error = raised.value
        assert isinstance(error, OffsetOutOfRangeError)
        assert error.fetch_offsets == {T0: 10}
        assert error.divergent_offsets == {T0: OffsetAndMetadata(6, "", 0)}
        assert "t-0" in str(error) or "TopicPartition" in str(error)
        with pytest.raises(LogTruncationError):
            consumer.poll(timeout_ms=0)  # again, until the application moves
        assert consumer.position(T0) == 10
        consumer.seek(T0, error.divergent_offsets[T0].offset)
        records = poll_until(consumer, 6)
        assert [r.value for r in records] == NEW


def test_records_fetched_ahead_past_the_cut_are_dropped_not_handed_out() -> None:
    """Positioned below the cut, the consumer loses nothing it handed out: what it fetched
    ahead from the old leader is dropped, and it reads the new history from its position."""
    with assigned_at_zero("none") as (cluster, consumer):
        first = poll_until(consumer, 3, records_max=3)
        assert [r.value for r in first] == OLD[:3]
        wait_until(
            lambda: any(offset == 10 for _, _, offset, _ in cluster.fetch_log),
            "the consumer to fetch ahead to offset 10",
        )
        unclean_election(cluster)
        state = consumer._subscription.partitions[T0]
        wait_until(lambda: state.blocked_by_error, "the diverging answer queued")
        records = poll_until(consumer, 9)
        # 3..5 are in both histories; 6..9 of the old one never go out.
        assert [r.value for r in records] == OLD[3:6] + NEW
        assert [r.offset for r in records] == list(range(3, 12))


def test_a_clean_leader_change_reads_on_without_a_reset() -> None:
    with assigned_at_zero("none") as (cluster, consumer):
        assert [r.value for r in poll_until(consumer, 10)] == OLD
        cluster.move_leader(T0, 2)
        cluster.append(T0, NEW)
        records = poll_until(consumer, 6)
        assert [(r.offset, r.value) for r in records] == list(zip(range(10, 16), NEW, strict=True))
    assert cluster.diverging_answers == []
