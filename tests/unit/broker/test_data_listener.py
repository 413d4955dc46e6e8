"""The data plane listener (broker/data_listener.py) over a real socket and broker 1's replica
manager (replica_harness): Produce and Fetch answered by correlation id, acks=all answered once
replicated without holding up the connection's next requests, and the connections it closes
(a frame it refuses, an unknown API, a request that does not parse, a dropped answer, stop)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest

from pykraft.broker.controller_channel import monotonic_ms
from pykraft.broker.data_listener import DataHandlers, DataListener
from pykraft.proto import broker_pb2, common_pb2
from pykraft.proto.data_plane import (
    REQUEST_BYTES_MAX,
    DataApi,
    read_response,
    request_frame,
)
from pykraft.proto.record_batch import build_batch

from .replica_harness import Harness, record_values, wall_clock_ms

TIMEOUT_S = 10


def produce_request(partition: int, values: list[bytes], *, acks: int) -> bytes:
    request = broker_pb2.ProduceRequest(acks=acks, timeout_ms=5_000)
    topic = request.topics.add(topic="orders")
    batch = build_batch([(1_000 + i, None, v) for i, v in enumerate(values)])
    topic.partitions.add(partition=partition, records=batch)
    return request.SerializeToString()


def fetch_request(partition: int, offset: int, *, wait_ms: int = 0) -> bytes:
    request = broker_pb2.FetchRequest(
        replica_id=-1, max_wait_ms=wait_ms, min_bytes=1, max_bytes=1 << 20
    )
    request.topics.add(topic="orders").partitions.add(
        partition=partition,
        fetch_offset=offset,
        current_leader_epoch=-1,
        last_fetched_epoch=-1,
        partition_max_bytes=1 << 20,
    )
    return request.SerializeToString()


def serving(harness: Harness, *, drop: bool = False) -> DataListener:
    handlers = DataHandlers(harness.manager, monotonic_ms, wall_clock_ms, lambda request: drop)
    listener = DataListener("127.0.0.1", 0, handlers)
    listener.start()
    return listener


@pytest.fixture
def listener(harness: Harness) -> Iterator[DataListener]:
    listener = serving(harness)
    yield listener
    listener.stop()


def connect(listener: DataListener) -> socket.socket:
    return socket.create_connection(("127.0.0.1", listener.port), timeout=TIMEOUT_S)


def answer(sock: socket.socket) -> tuple[int, bytes]:
    frame = read_response(sock)
    assert frame is not None, "the listener closed the connection"
    return frame[0], bytes(frame[1])


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the listener closed `sock` (it answers nothing more)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_produce_then_fetch_over_the_wire(listener: DataListener) -> None:
    with connect(listener) as sock:
        sock.sendall(request_frame(DataApi.PRODUCE, 7, produce_request(0, [b"a", b"b"], acks=1)))
        correlation_id, body = answer(sock)
        assert correlation_id == 7
        result = broker_pb2.ProduceResponse.FromString(body).topics[0].partitions[0]
        assert (result.error_code, result.base_offset) == (common_pb2.NONE, 0)
        sock.sendall(request_frame(DataApi.FETCH, 8, fetch_request(0, 0)))
        correlation_id, body = answer(sock)
        assert correlation_id == 8
        fetched = broker_pb2.FetchResponse.FromString(body).topics[0].partitions[0]
        assert record_values(fetched.records) == [(0, b"a"), (1, b"b")]


def test_an_acks_all_wait_does_not_hold_up_the_next_requests(
    harness: Harness, listener: DataListener
) -> None:
    """orders-1 has follower 2 in its ISR: its acks=all answers wait for the follower, while
    the acks=1 request sent after them on the same connection is answered at once."""
    with connect(listener) as sock:
        for correlation_id in (1, 2):
            request = produce_request(1, [b"x%d" % correlation_id], acks=-1)
            sock.sendall(request_frame(DataApi.PRODUCE, correlation_id, request))
        sock.sendall(request_frame(DataApi.PRODUCE, 3, produce_request(0, [b"y"], acks=1)))
        assert answer(sock)[0] == 3
        harness.fetch({1: 2}, replica_id=2)  # the follower has both: the mark moves
        answers = dict(answer(sock) for _ in range(2))
    offsets = {
        correlation_id: broker_pb2.ProduceResponse.FromString(body).topics[0].partitions[0]
        for correlation_id, body in answers.items()
    }
    assert [(r.error_code, r.base_offset) for r in (offsets[1], offsets[2])] == [
        (common_pb2.NONE, 0),
        (common_pb2.NONE, 1),
    ]


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">IBI", REQUEST_BYTES_MAX + 1, DataApi.PRODUCE, 1),
        struct.pack(">IBI", 5, 99, 1),
        request_frame(DataApi.FETCH, 1, b"\xff\xff\xff"),
    ],
    ids=["too large", "unknown API", "unparsable request"],
)
def test_a_bad_frame_closes_its_connection_only(listener: DataListener, frame: bytes) -> None:
    with connect(listener) as bad, connect(listener) as good:
        bad.sendall(frame)
        assert closed_by_peer(bad)
        good.sendall(request_frame(DataApi.FETCH, 2, fetch_request(0, 0)))
        assert answer(good)[0] == 2


def test_a_dropped_answer_closes_the_connection(harness: Harness) -> None:
    listener = serving(harness, drop=True)
    try:
        with connect(listener) as sock:
            sock.sendall(request_frame(DataApi.PRODUCE, 1, produce_request(0, [b"a"], acks=1)))
            assert closed_by_peer(sock)
        assert harness.fetch({0: 0})[0].high_watermark == 1  # written all the same
    finally:
        listener.stop()


def test_stop_closes_connections_and_a_parked_fetch(harness: Harness) -> None:
    listener = serving(harness)
    with connect(listener) as sock:
        sock.sendall(request_frame(DataApi.FETCH, 1, fetch_request(0, 0, wait_ms=20_000)))
        listener.stop()
        assert closed_by_peer(sock)
    with pytest.raises(OSError):
        connect(listener)
