"""Consumer against in-process fake brokers over real gRPC: positions, resets, leader moves,
offsets by time, assignment and settings (background fetching: test_consumer_prefetch.py)."""

from __future__ import annotations

import time

import pytest

from pykraft.client import (
    Consumer,
    ConsumerRecord,
    NoOffsetForPartitionError,
    RequestTimedOutError,
    TopicPartition,
)
from pykraft.client.types import OffsetAndTimestamp
from pykraft.proto import common_pb2
from tests.unit.client.fake_broker import WAIT_S, FakeCluster, running
from tests.waiting import wait_until

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def poll_until(consumer: Consumer, count: int, **kwargs: int) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + WAIT_S
    while len(records) < count:
        assert time.monotonic() < deadline, f"only {len(records)} of {count} records"
        records += consumer.poll(timeout_ms=100, **kwargs)
    return records


def fill(cluster: FakeCluster) -> None:
    cluster.append(T0, [b"a0", b"a1", b"a2"])
    cluster.append(T0, [b"a3", b"a4"])
    cluster.append(T1, [b"b0", b"b1"], key=b"k")


def test_poll_hands_out_each_record_once_in_offset_order() -> None:
    with running({"t": 2}) as cluster:
        fill(cluster)
        with Consumer(
            bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([T0, T1])
            assert consumer.assignment() == {T0, T1}
            records = poll_until(consumer, 7, records_max=2)
            assert len(records) == 7
            by_tp = {
                tp: [(r.offset, r.value) for r in records if r.partition == tp.partition]
                for tp in (T0, T1)
            }
            assert by_tp[T0] == [(i, b"a%d" % i) for i in range(5)]
            assert by_tp[T1] == [(0, b"b0"), (1, b"b1")]
            assert {r.key for r in records if r.partition == 1} == {b"k"}
            assert consumer.poll(timeout_ms=50) == []
            assert (consumer.position(T0), consumer.position(T1)) == (5, 2)


def test_max_records_limits_each_poll_and_keeps_the_rest() -> None:
    with running({"t": 1}) as cluster:
        cluster.append(T0, [b"%d" % i for i in range(5)])
        with Consumer(bootstrap_servers=cluster.bootstrap) as consumer:
            consumer.assign([T0])
            consumer.seek(T0, 0)
            first = consumer.poll(timeout_ms=int(WAIT_S * 1000), records_max=2)
            assert [r.offset for r in first] == [0, 1]
            assert consumer.position(T0) == 2
            rest = poll_until(consumer, 3)
            assert [r.offset for r in rest] == [2, 3, 4]


def test_seek_starts_mid_batch_and_skips_earlier_records() -> None:
    with running({"t": 2}) as cluster:
        fill(cluster)
        with Consumer(bootstrap_servers=cluster.bootstrap) as consumer:
            consumer.assign([T0])
            consumer.seek(T0, 1)
            assert [r.value for r in poll_until(consumer, 4)] == [b"a1", b"a2", b"a3", b"a4"]
            consumer.seek_to_beginning()
            assert consumer.position(T0) == 0
            consumer.seek_to_end([T0])
            assert consumer.position(T0) == 5
            with pytest.raises(ValueError, match="not assigned"):
                consumer.seek(T1, 0)


def test_latest_starts_at_the_end_and_sees_only_new_records() -> None:
    with running({"t": 2}) as cluster:
        fill(cluster)
        with Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="latest") as c:
            c.assign([T0])
            assert c.position(T0) == 5
            cluster.append(T0, [b"new"])
            assert [(r.offset, r.value) for r in poll_until(c, 1)] == [(5, b"new")]


def test_long_poll_returns_records_produced_while_waiting() -> None:
    with (
        running({"t": 1}) as cluster,
        Consumer(bootstrap_servers=cluster.bootstrap, fetch_max_wait_ms=2000) as c,
    ):
        c.assign([T0])
        assert c.position(T0) == 0
        cluster.append(T0, [b"x"])
        assert [r.value for r in c.poll(timeout_ms=int(WAIT_S * 1000))] == [b"x"]


def test_out_of_range_resets_by_policy() -> None:
    with running({"t": 2}) as cluster:
        fill(cluster)
        with Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest") as c:
            c.assign([T0])
            c.seek(T0, 100)
            assert [r.offset for r in poll_until(c, 5)] == [0, 1, 2, 3, 4]


def test_out_of_range_with_policy_none_raises() -> None:
    with running({"t": 2}) as cluster:
        fill(cluster)
        with Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="none") as c:
            c.assign([T0])
            with pytest.raises(NoOffsetForPartitionError, match="seek first"):
                c.poll(timeout_ms=100)
            c.seek(T0, 100)
            with pytest.raises(NoOffsetForPartitionError, match="offset 100 is out of range"):
                c.poll(timeout_ms=int(WAIT_S * 1000))


def test_beginning_and_end_offsets() -> None:
    with running({"t": 2}) as cluster:
        fill(cluster)
        cluster.log_start[T0] = 2
        with Consumer(bootstrap_servers=cluster.bootstrap) as consumer:
            assert consumer.beginning_offsets([T0, T1]) == {T0: 2, T1: 0}
            assert consumer.end_offsets([T0, T1]) == {T0: 5, T1: 2}
            assert consumer.partitions_for("t") == [0, 1]


def test_offsets_of_a_partition_the_topic_lacks_time_out_as_kafkas_consumer_does() -> None:
    with running({"t": 1}) as cluster:
        consumer = Consumer(bootstrap_servers=cluster.bootstrap, default_api_timeout_ms=300)
        with consumer, pytest.raises(RequestTimedOutError, match="no offsets for t-5 within 300"):
            consumer.end_offsets([TopicPartition("t", 5)])


def test_a_moved_leader_is_found_after_not_leader_or_fenced_epoch() -> None:
    with running({"t": 2}, brokers=2) as cluster:
        fill(cluster)
        with Consumer(
            bootstrap_servers=cluster.brokers[0].address,
            auto_offset_reset="earliest",
            retry_backoff_ms=10,
        ) as consumer:
            consumer.assign([T0])
            assert [r.offset for r in poll_until(consumer, 5)] == [0, 1, 2, 3, 4]
            cluster.move_leader(T0, 2)  # broker 1 now answers NOT_LEADER_OR_FOLLOWER
            cluster.append(T0, [b"a5"])
            assert [r.value for r in poll_until(consumer, 1)] == [b"a5"]
            assert cluster.requests[(2, "Fetch")] >= 1
            cluster.move_leader(T0, 2)  # same leader, newer epoch: FENCED_LEADER_EPOCH first
            cluster.append(T0, [b"a6"])
            assert [r.value for r in poll_until(consumer, 1)] == [b"a6"]
            assert set(cluster.fetch_errors) == {
                common_pb2.NOT_LEADER_OR_FOLLOWER,
                common_pb2.FENCED_LEADER_EPOCH,
            }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"auto_offset_reset": "smallest"}, "auto_offset_reset must be"),
        ({"fetch_max_wait_ms": -1}, "fetch_max_wait_ms must be an integer of at least 0"),
        ({"max_partition_fetch_bytes": 0}, "max_partition_fetch_bytes must be"),
        ({"fetch_max_bytes": "1"}, "fetch_max_bytes must be an integer"),
        ({"fetch_buffer_bytes_max": 0}, "fetch_buffer_bytes_max must be an integer of at least 1"),
        ({"max_poll_records": 0}, "max_poll_records must be an integer of at least 1"),
        ({"isolation_level": "committed"}, "isolation_level must be 'read_uncommitted' or"),
        ({"request_timeout_ms": True}, "request_timeout_ms must be an integer"),
        ({"check_crcs": "yes"}, "check_crcs must be True or False"),
        ({"client_id": 7}, "client_id must be a string"),
        ({"client_rack": None}, "client_rack must be a string"),
        ({"metadata_max_age_ms": -1}, "metadata_max_age_ms must be an integer of at least 0"),
    ],
)
def test_bad_config_values_raise_value_error(kwargs: dict[str, object], message: str) -> None:
    config: dict[str, object] = {"bootstrap_servers": "127.0.0.1:1", **kwargs}
    with pytest.raises(ValueError, match=message):
        Consumer(**config)  # type: ignore[arg-type]


def test_unknown_config_names_raise_type_error() -> None:
    with pytest.raises(TypeError, match="group_idd"):
        Consumer(bootstrap_servers="127.0.0.1:1", group_idd="g")  # type: ignore[call-arg]


def test_poll_hands_out_at_most_max_poll_records_by_default() -> None:
    with running({"t": 1}) as cluster:
        cluster.append(T0, [b"%d" % i for i in range(12)])
        with Consumer(
            bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest", max_poll_records=5
        ) as consumer:
            consumer.assign([T0])
            first = consumer.poll(timeout_ms=int(WAIT_S * 1000))
            assert [r.offset for r in first] == [0, 1, 2, 3, 4]
            assert [r.offset for r in consumer.poll(records_max=10)] == list(range(5, 12))
            with pytest.raises(ValueError, match="records_max must be at least 1"):
                consumer.poll(records_max=0)
            with pytest.raises(ValueError, match="timeout_ms must be an integer of at least 0"):
                consumer.poll(timeout_ms=-1)


def test_offsets_for_times_finds_the_first_record_at_or_after_each_time() -> None:
    with running({"t": 2}) as cluster:
        cluster.append(T0, [b"a", b"b", b"c"], timestamps=[100, 200, 300])
        cluster.append(T0, [b"d"], timestamps=[400])
        with Consumer(bootstrap_servers=cluster.bootstrap) as consumer:
            assert consumer.offsets_for_times({T0: 150, T1: 0}) == {
                T0: OffsetAndTimestamp(1, 200),
                T1: None,
            }
            assert consumer.offsets_for_times({T0: 0}) == {T0: OffsetAndTimestamp(0, 100)}
            assert consumer.offsets_for_times({T0: 400}) == {T0: OffsetAndTimestamp(3, 400)}
            assert consumer.offsets_for_times({T0: 401}) == {T0: None}
            assert consumer.offsets_for_times({}) == {}
            with pytest.raises(ValueError, match="timestamp for t-0 must be an integer of at"):
                consumer.offsets_for_times({T0: -1})
            found = consumer.offsets_for_times({T0: 250})[T0]
            assert found is not None
            consumer.assign([T0])
            consumer.seek(T0, found.offset)
            assert [r.value for r in poll_until(consumer, 2)] == [b"c", b"d"]


def test_assign_keeps_kept_partitions_and_forgets_the_rest() -> None:
    with running({"t": 2}) as cluster:
        fill(cluster)
        with Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest") as c:
            c.assign([T0, T1])
            c.seek(T0, 2)
            partitions = c._subscription.partitions
            wait_until(lambda: partitions[T0].fetches and partitions[T1].fetches, "prefetch")
            c.pause([T0])
            c.assign([T0])
            assert c.assignment() == {T0}
            assert c.paused() == {T0}
            assert c.position(T0) == 2
            assert partitions[T0].fetches, "kept with the partition"
            with pytest.raises(ValueError, match="t-1 is not assigned"):
                c.position(T1)
            c.resume([T0])
            records = poll_until(c, 3)
            assert [(r.partition, r.offset) for r in records] == [(0, 2), (0, 3), (0, 4)]
            c.assign([])
            assert c.assignment() == set()
            assert c._subscription.buffered_bytes == 0
            assert c.poll(timeout_ms=10) == []
            with pytest.raises(TypeError, match="TopicPartition"):
                c.assign([("t", 0)])  # type: ignore[list-item]


def test_position_waits_for_a_reset_looked_up_in_the_background() -> None:
    with running({"t": 2}) as cluster:
        fill(cluster)
        with Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="none") as c:
            c.assign([T0, T1])
            c.seek_to_end([T0])
            assert c.position(T0) == 5
            with pytest.raises(NoOffsetForPartitionError, match=r"t-1 .* seek first"):
                c.position(T1)
            c.seek_to_beginning()  # every assigned partition
            assert (c.position(T0), c.position(T1)) == (0, 0)
            with pytest.raises(ValueError, match="offset must be an integer of at least 0"):
                c.seek(T0, -1)


def test_read_committed_is_accepted_and_sent_to_the_broker() -> None:
    with running({"t": 2}) as cluster:
        fill(cluster)
        with Consumer(
            bootstrap_servers=cluster.bootstrap,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        ) as consumer:
            consumer.assign([T0])
            assert [r.offset for r in poll_until(consumer, 5)] == [0, 1, 2, 3, 4]
        assert cluster.fetch_isolation_levels == {1}
