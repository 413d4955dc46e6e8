"""The consumer's background fetching against in-process fake brokers over real gRPC, when the
partitions' leaders move and fetches fail: retried errors, typed errors raised once, positions
reset by policy, deleted topics and damaged batches."""

from __future__ import annotations

import time

import pytest

from pykraft.client import (
    Consumer,
    CorruptMessageError,
    InvalidRequestError,
    KafkaError,
    NoOffsetForPartitionError,
    TopicPartition,
    UnknownTopicOrPartitionError,
)
from pykraft.proto import common_pb2
from tests.unit.client.consumer_polling import T0, WAIT_MS, offsets, poll_until, values
from tests.unit.client.fake_broker import WAIT_S, running
from tests.waiting import wait_until


def poll_until_error(consumer: Consumer) -> KafkaError:
    deadline = time.monotonic() + WAIT_S
    while True:
        assert time.monotonic() < deadline, "poll never raised"
        try:
            consumer.poll(timeout_ms=50)
        except KafkaError as e:
            return e


def test_consumer_follows_a_moving_leader_without_skipping_or_repeating() -> None:
    with running({"t": 1}, brokers=3) as cluster:
        with Consumer(
            bootstrap_servers=cluster.brokers[0].address,
            auto_offset_reset="earliest",
            retry_backoff_ms=10,
            fetch_max_wait_ms=100,
        ) as consumer:
            consumer.assign([T0])
            expected: list[bytes | None] = []
            got: list[bytes | None] = []
            for round_ in range(9):
                batch = [b"%d-%d" % (round_, i) for i in range(6)]
                cluster.append(T0, batch[:3])
                cluster.append(T0, batch[3:])
                expected += batch
                got += values(consumer.poll(timeout_ms=20, records_max=4))
                cluster.move_leader(T0, round_ % 3 + 1)  # 1 (a newer epoch), 2, 3, 1, ...
                got += values(consumer.poll(timeout_ms=20, records_max=4))
            got += values(poll_until(consumer, len(expected) - len(got)))
            assert got == expected
        assert common_pb2.NOT_LEADER_OR_FOLLOWER in cluster.fetch_errors
        assert all(cluster.requests[(node, "Fetch")] > 0 for node in (1, 2, 3))


def test_retriable_fetch_errors_are_retried_never_raised() -> None:
    with running({"t": 1}) as cluster:
        cluster.append(T0, [b"%d" % i for i in range(5)])
        script = [
            common_pb2.UNKNOWN_LEADER_EPOCH,
            common_pb2.NOT_LEADER_OR_FOLLOWER,
            common_pb2.FENCED_LEADER_EPOCH,
            common_pb2.LEADER_NOT_AVAILABLE,
            common_pb2.REQUEST_TIMED_OUT,
        ]
        cluster.fetch_script[T0] = list(script)
        with Consumer(
            bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=10
        ) as consumer:
            consumer.assign([T0])
            assert offsets(poll_until(consumer, 5)) == [0, 1, 2, 3, 4]
        assert cluster.fetch_errors == script
        assert cluster.requests[(1, "Metadata")] >= 3  # refreshed after the stale-leader errors


def test_an_unreachable_leader_is_retried_until_leadership_moves() -> None:
    with running({"t": 1}, brokers=2) as cluster:
        cluster.move_leader(T0, 2)
        cluster.append(T0, [b"a0"])
        with Consumer(
            bootstrap_servers=cluster.brokers[0].address,
            auto_offset_reset="earliest",
            retry_backoff_ms=10,
            request_timeout_ms=500,
        ) as consumer:
            consumer.assign([T0])
            assert values(poll_until(consumer, 1)) == [b"a0"]
            cluster.brokers[1].server.stop(grace=None)
            cluster.append(T0, [b"a1"])
            assert consumer.poll(timeout_ms=300) == []  # connection errors: retried, not raised
            cluster.move_leader(T0, 1)
            assert values(poll_until(consumer, 1)) == [b"a1"]


def test_a_non_retriable_fetch_error_is_raised_typed_once() -> None:
    with running({"t": 1}) as cluster:
        cluster.append(T0, [b"a0", b"a1"])
        cluster.fetch_script[T0] = [common_pb2.INVALID_REQUEST]
        with Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest") as c:
            c.assign([T0])
            error = poll_until_error(c)
            assert isinstance(error, InvalidRequestError)
            assert values(poll_until(c, 2)) == [b"a0", b"a1"]


@pytest.mark.parametrize("policy", ["earliest", "latest", "none"])
def test_a_position_that_falls_below_the_log_start_resets_by_policy(policy: str) -> None:
    with running({"t": 1}) as cluster:
        cluster.append(T0, [b"%d" % i for i in range(5)])
        with Consumer(
            bootstrap_servers=cluster.bootstrap, auto_offset_reset=policy, retry_backoff_ms=10
        ) as c:
            c.assign([T0])
            c.seek(T0, 0)
            assert offsets(poll_until(c, 5)) == [0, 1, 2, 3, 4]
            with cluster.lock:  # retention deletes 0..7 before the consumer sees 5..7
                cluster.append(T0, [b"%d" % i for i in range(5, 10)])
                cluster.log_start[T0] = 8
            if policy == "none":
                error = poll_until_error(c)
                assert isinstance(error, NoOffsetForPartitionError)
                assert "offset 5 is out of range for t-0" in str(error)
                return
            if policy == "earliest":
                assert offsets(poll_until(c, 2)) == [8, 9]
                return
            wait_until(lambda: c.poll(timeout_ms=10) == [] and c.position(T0) == 10, "a reset")
            cluster.append(T0, [b"10"])
            assert offsets(poll_until(c, 1)) == [10]


def test_a_deleted_topic_raises_unknown_topic_from_poll_and_the_rest_goes_on() -> None:
    u0 = TopicPartition("u", 0)
    with running({"t": 1, "u": 1}) as cluster:
        cluster.append(T0, [b"x"])
        cluster.append(u0, [b"y"])
        with Consumer(
            bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=10
        ) as c:
            c.assign([T0, u0])
            assert set(values(poll_until(c, 2))) == {b"x", b"y"}
            cluster.delete_topic("t")
            error = poll_until_error(c)
            assert isinstance(error, UnknownTopicOrPartitionError)
            assert "topic 't' no longer exists" in str(error)
            cluster.append(u0, [b"z"])
            assert values(poll_until(c, 1)) == [b"z"]


def test_a_batch_failing_its_crc_raises_at_every_poll_until_sought_past() -> None:
    with running({"t": 1}) as cluster:
        cluster.append(T0, [b"a0", b"a1"])
        cluster.append(T0, [b"a2", b"a3"])
        cluster.append(T0, [b"a4"])
        cluster.corrupt(T0, 1)
        with Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest") as c:
            c.assign([T0])
            assert values(poll_until(c, 2)) == [b"a0", b"a1"]
            for _ in range(2):
                with pytest.raises(CorruptMessageError, match=r"offsets 2\.\.3 failed its CRC"):
                    c.poll(timeout_ms=WAIT_MS)
            assert c.position(T0) == 2
            c.seek(T0, 4)
            assert values(poll_until(c, 1)) == [b"a4"]


def test_check_crcs_false_hands_out_the_records_of_a_damaged_batch() -> None:
    with running({"t": 1}) as cluster:
        cluster.append(T0, [b"a0", b"a1"])
        cluster.corrupt(T0, 0)  # a1 now reads a0
        with Consumer(
            bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest", check_crcs=False
        ) as c:
            c.assign([T0])
            assert values(poll_until(c, 2)) == [b"a0", b"a0"]
