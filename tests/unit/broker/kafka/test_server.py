"""The listener over real sockets: pipelined answers in order, and the frames that close a
connection while the listener keeps serving others."""

from __future__ import annotations

import datetime
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v4.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v4.response import MetadataResponse
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta

from pykraft.broker.kafka.api import Api, KafkaServices, RequestContext
from pykraft.broker.kafka.codec import SIZE, decode_response, encode_request
from pykraft.broker.kafka.dispatch import Dispatcher
from pykraft.broker.kafka.server import KafkaListener
from tests.unit.broker.kafka.listener_socket import connect, read_frame

REQUEST_BYTES_MAX = 4096


def _echo_slowly(ctx: RequestContext, request: Any) -> MetadataResponse:
    """Answers with the first topic's name as cluster id, after sleeping its length in 10 ms;
    a topic named "boom" raises."""
    name = request.topics[0].name
    if name == "boom":
        raise RuntimeError("handler failure")
    time.sleep(len(name) / 100)
    return MetadataResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        brokers=(),
        cluster_id=name,
        controller_id=i32(-1),  # type: ignore[arg-type]
        topics=(),
    )


@pytest.fixture
def listener() -> Iterator[KafkaListener]:
    services: KafkaServices = None  # type: ignore[assignment]  # the handlers here use none
    server = KafkaListener(
        "127.0.0.1",
        0,
        Dispatcher([Api(3, 4, 4, _echo_slowly)]),
        services,
        request_bytes_max=REQUEST_BYTES_MAX,
    )
    server.start()
    yield server
    server.stop()


def _metadata(correlation_id: int, name: str) -> bytes:
    topics = (MetadataRequestTopic(name=TopicName(name)),)
    return encode_request(
        correlation_id, MetadataRequest(topics=topics, allow_auto_topic_creation=False)
    )


def _assert_serves(listener: KafkaListener) -> None:
    with connect(listener) as sock:
        request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        sock.sendall(encode_request(1, request))
        _, body = decode_response(read_frame(sock), ApiVersionsResponse)
        assert body.error_code is ErrorCode.none


def _assert_closed(sock: socket.socket) -> None:
    assert sock.recv(1) == b""


def test_pipelined_requests_are_answered_in_request_order(listener: KafkaListener) -> None:
    names = ["slowest-of-all", "mid", "a"]
    with connect(listener) as sock:
        sock.sendall(b"".join(_metadata(i, name) for i, name in enumerate(names)))
        answers = [decode_response(read_frame(sock), MetadataResponse) for _ in names]
    assert [(cid, body.cluster_id) for cid, body in answers] == list(enumerate(names))


@pytest.mark.parametrize(
    "frame",
    [
        SIZE.pack(REQUEST_BYTES_MAX + 1) + b"\x00" * 64,
        SIZE.pack(-1),
        SIZE.pack(6) + b"\xff\xff\x00\x00\x00\x00",
        _metadata(3, "boom"),
    ],
    ids=["oversized", "negative-size", "garbage", "handler-raises"],
)
def test_bad_frames_close_the_connection_and_the_listener_keeps_serving(
    listener: KafkaListener, frame: bytes
) -> None:
    with connect(listener) as sock:
        sock.sendall(_metadata(1, "ok") + frame)
        assert decode_response(read_frame(sock), MetadataResponse)[0] == 1
        _assert_closed(sock)
    _assert_serves(listener)
