"""`ClusterMetadata.known_partition_counts`, what the producer's per-record path reads without a
lock: the counts of followed topics only, gone once the cluster reports the topic's error. And
the data plane's routing: Produce and Fetch go to the data_port the metadata names for a
broker, over gRPC when it names none; every other method is gRPC."""

from __future__ import annotations

from collections.abc import Callable

from google.protobuf.message import Message

from pykraft.client.broker_connection import BrokerConnection, ConnectionPool
from pykraft.client.cluster_metadata import ClusterMetadata
from pykraft.proto import broker_pb2 as pb
from pykraft.proto.data_plane import DataApi
from tests.unit.client.fake_broker import running
from tests.unit.client.frame_server import FrameServer
from tests.waiting import wait_until

TIMEOUT_MS = 5000


def test_known_counts_hold_followed_topics_until_the_cluster_reports_an_error() -> None:
    with running({"t": 2, "u": 3}) as cluster:
        pool = ConnectionPool(retry_backoff_ms=10)
        metadata = ClusterMetadata(
            [cluster.bootstrap], pool, request_timeout_ms=5000, retry_backoff_ms=10
        )
        try:
            metadata.add_topics(["t"])
            metadata.refresh(now_ms=0)
            assert metadata.known_partition_counts == {"t": 2}
            assert metadata.wait_for_topic("u", timeout_ms=5000) == 3
            assert metadata.known_partition_counts == {"t": 2, "u": 3}
            cluster.delete_topic("t")
            metadata.refresh(now_ms=1)
            assert metadata.known_partition_counts == {"u": 3}
        finally:
            pool.close()


def answered_by(name: str) -> Callable[[DataApi, bytes], Message]:
    """A data plane listener's answers, naming it as their topic."""

    def answer(api: DataApi, body: bytes) -> Message:
        if api == DataApi.PRODUCE:
            return pb.ProduceResponse(topics=[{"topic": name}])
        return pb.FetchResponse(topics=[{"topic": name}])

    return answer


def who_answers(connection: BrokerConnection) -> tuple[str, str]:
    """Who answered a Produce and a Fetch: a data plane listener's name, or "grpc" (the fake
    broker answers these empty requests with no topics)."""
    produce = connection.call("Produce", pb.ProduceRequest(), pb.ProduceResponse, TIMEOUT_MS)
    fetch = connection.call("Fetch", pb.FetchRequest(), pb.FetchResponse, TIMEOUT_MS)
    produced = produce.topics[0].topic if produce.topics else "grpc"
    return produced, fetch.topics[0].topic if fetch.topics else "grpc"


def test_produce_and_fetch_go_to_the_data_port_the_metadata_names() -> None:
    first, second = FrameServer(answered_by("first")), FrameServer(answered_by("second"))
    with running({"t": 1}) as cluster:
        broker = cluster.brokers[0]
        pool = ConnectionPool(retry_backoff_ms=10)
        metadata = ClusterMetadata(
            [cluster.bootstrap], pool, request_timeout_ms=TIMEOUT_MS, retry_backoff_ms=10
        )
        try:
            broker.data_port = first.port
            metadata.refresh(now_ms=0)
            connection = pool.get(broker.address)
            assert who_answers(connection) == ("first", "first")
            connection.call("ListOffsets", pb.ListOffsetsRequest(), pb.ListOffsetsResponse, 1000)
            assert cluster.requests[(1, "ListOffsets")] == 1  # always gRPC
            broker.data_port = second.port  # restarted elsewhere
            metadata.refresh(now_ms=1)
            assert who_answers(connection) == ("second", "second")
            wait_until(lambda: first.ended == 1, "the connection to the old port closed")
            broker.data_port = 0
            metadata.refresh(now_ms=2)
            assert who_answers(connection) == ("grpc", "grpc")
            assert cluster.requests[(1, "Produce")] == cluster.requests[(1, "Fetch")] == 1
            pool.set_data_addresses({"127.0.0.1:1": first.address})  # before any connection
            assert who_answers(pool.get("127.0.0.1:1")) == ("first", "first")
        finally:
            pool.close()
            first.close()
            second.close()
