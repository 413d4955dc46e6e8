"""A consumer with a `client_rack` reads from the replica its leader names (KIP-392), and goes
back to the leader when that replica answers an error (NOT_LEADER_OR_FOLLOWER,
OFFSET_OUT_OF_RANGE: no reset), does not answer, or its lease (`metadata_max_age_ms`) ends;
every record is handed out once, in order. Fake brokers over real gRPC: broker 1 leads t-0,
broker 2 is its in-sync follower when `read_replicas` says so."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import grpc

from pykraft.client import Consumer
from pykraft.proto import common_pb2
from tests.unit.client.consumer_polling import T0, offsets, poll_until, values
from tests.unit.client.fake_broker import FakeCluster, running
from tests.waiting import wait_until


def _fetched_from(cluster: FakeCluster) -> list[int]:
    """The broker of every Fetch so far, in order."""
    with cluster.lock:
        return [broker for broker, _, _, _ in cluster.fetch_log]


def _rack_consumer(cluster: FakeCluster, **settings: int) -> Consumer:
    consumer = Consumer(
        bootstrap_servers=cluster.brokers[0].address,
        auto_offset_reset="earliest",
        client_rack="r2",
        **settings,  # type: ignore[arg-type]
    )
    consumer.assign([T0])
    return consumer


@contextmanager
def _reading_from_the_replica(
    count: int, **settings: int
) -> Iterator[tuple[FakeCluster, Consumer]]:
    """Two brokers and a rack consumer that read t-0's first `count` records from broker 2."""
    with running({"t": 1}, brokers=2) as cluster:
        cluster.read_replicas[T0] = 2
        cluster.append(T0, [b"%d" % i for i in range(count)])
        with _rack_consumer(cluster, **settings) as consumer:
            assert offsets(poll_until(consumer, count)) == list(range(count))
            assert _fetched_from(cluster)[-1] == 2
            yield cluster, consumer


def test_a_consumer_with_a_rack_reads_from_the_replica_its_leader_names() -> None:
    with running({"t": 1}, brokers=2) as cluster:
        cluster.read_replicas[T0] = 2
        cluster.append(T0, [b"a", b"b", b"c"])
        with _rack_consumer(cluster) as consumer:
            assert values(poll_until(consumer, 3)) == [b"a", b"b", b"c"]
            cluster.append(T0, [b"d"])
            assert offsets(poll_until(consumer, 1)) == [3]
        fetched_from = _fetched_from(cluster)
        assert fetched_from[0] == 1 and set(fetched_from[1:]) == {2}
        assert set(cluster.fetch_racks) == {"r2"}


def test_without_a_rack_the_consumer_sends_none_and_reads_from_the_leader() -> None:
    with running({"t": 1}, brokers=2) as cluster:
        cluster.read_replicas[T0] = 2
        cluster.append(T0, [b"a", b"b"])
        with Consumer(
            bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([T0])
            assert values(poll_until(consumer, 2)) == [b"a", b"b"]
        assert set(_fetched_from(cluster)) == {1}
        assert set(cluster.fetch_racks) == {None}


def test_a_replica_that_stops_following_sends_the_consumer_back_to_the_leader() -> None:
    with _reading_from_the_replica(2) as (cluster, consumer):
        with cluster.lock:
            del cluster.read_replicas[T0]  # broker 2 now answers NOT_LEADER_OR_FOLLOWER
            cluster.lock.notify_all()
        cluster.append(T0, [b"c", b"d"])
        assert values(poll_until(consumer, 2)) == [b"c", b"d"]
        assert consumer.poll(timeout_ms=100) == []
        assert common_pb2.NOT_LEADER_OR_FOLLOWER in cluster.fetch_errors
        assert _fetched_from(cluster)[-1] == 1


def test_out_of_range_at_the_replica_is_no_reset_but_a_return_to_the_leader() -> None:
    with _reading_from_the_replica(2) as (cluster, consumer):
        with cluster.lock:
            cluster.fetch_script[T0].append(common_pb2.OFFSET_OUT_OF_RANGE)
        cluster.append(T0, [b"c"])
        wait_until(lambda: not cluster.fetch_script[T0], "the replica's answer")
        cluster.append(T0, [b"d"])
        # Read once each, in order: the earliest reset would hand out 0 and 1 again.
        assert values(poll_until(consumer, 2)) == [b"c", b"d"]
        assert consumer.position(T0) == 4
        fetched_from = _fetched_from(cluster)
        assert fetched_from.count(1) >= 2  # the leader asked again, and named broker 2 again
        assert fetched_from[-1] == 2


def test_a_replica_that_does_not_answer_sends_the_consumer_back_to_the_leader() -> None:
    with _reading_from_the_replica(1) as (cluster, consumer):
        leader_fetches = _fetched_from(cluster).count(1)
        with cluster.lock:
            cluster.rpc_aborts["Fetch"].append(grpc.StatusCode.UNAVAILABLE)
        cluster.append(T0, [b"b", b"c"])
        assert values(poll_until(consumer, 2)) == [b"b", b"c"]
        assert _fetched_from(cluster).count(1) > leader_fetches


def test_the_leader_is_asked_again_once_the_lease_ends() -> None:
    lease = {"metadata_max_age_ms": 200, "fetch_max_wait_ms": 50}
    with _reading_from_the_replica(1, **lease) as (cluster, _):
        wait_until(lambda: _fetched_from(cluster).count(1) >= 3, "the leader asked again")
        assert set(_fetched_from(cluster)) == {1, 2}
