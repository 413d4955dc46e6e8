"""ApiVersions through the dispatcher, the frames Kafka answers by closing the connection, and
the request metrics every answered call records."""

from __future__ import annotations

import io
from typing import Any

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.api_versions.v3.response import ApiVersionsResponse as ApiVersionsResponseV3
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_writer
from kio.static.primitive import i16, i32
from prometheus_client import REGISTRY

from pykraft.broker.kafka.api import Api, KafkaServices, RequestContext
from pykraft.broker.kafka.codec import SIZE, FrameError, decode_response, encode_request
from pykraft.broker.kafka.dispatch import Dispatcher


def _never(ctx: RequestContext, request: Any) -> Any:
    raise AssertionError("not called")


DISPATCHER = Dispatcher([Api(3, 0, 12, _never)])
SERVICES: KafkaServices = None  # type: ignore[assignment]  # ApiVersions uses no service


def _answer(frame: bytes) -> bytes:
    answer = DISPATCHER.answer(DISPATCHER.decode(frame[SIZE.size :]), SERVICES, "127.0.0.1")
    assert isinstance(answer, bytes)
    return answer[SIZE.size :]


def test_api_versions_lists_every_served_api_with_its_range() -> None:
    frame = encode_request(4, ApiVersionsV3(client_software_name="x", client_software_version="1"))
    correlation_id, body = decode_response(_answer(frame), ApiVersionsResponseV3)
    assert correlation_id == 4 and body.error_code is ErrorCode.none
    ranges = [(k.api_key, k.min_version, k.max_version) for k in body.api_keys]
    assert ranges == [(3, 0, 12), (18, 0, 3)]


@pytest.mark.parametrize(
    ("version", "header_type"),
    [(99, RequestHeader), (-1, RequestHeaderV1)],
    ids=["above", "negative"],
)
def test_an_unknown_api_versions_version_gets_unsupported_version_in_the_v0_body(
    version: int, header_type: type[Any]
) -> None:
    """Kafka answers any ApiVersions version it does not serve, below its range too (found by
    the fuzzer: a negative one closed the connection); the header is v2 from v3 on, else v1."""
    buffer = io.BytesIO()
    header = header_type(
        request_api_key=i16(18),
        request_api_version=i16(version),
        correlation_id=i32(8),
        client_id="c",
    )
    entity_writer(header_type)(buffer, header)
    buffer.write(b"\x03new\x02\x01\x00")  # a body from the future, never read
    payload = buffer.getvalue()
    answer = _answer(SIZE.pack(len(payload)) + payload)
    correlation_id, body = decode_response(answer, ApiVersionsResponseV0)
    assert correlation_id == 8 and body.error_code is ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [
        (3, 0, 12),
        (18, 0, 3),
    ]


@pytest.mark.parametrize(
    "frame",
    [b"\x00\x01\x00\x04\x00\x00\x00\x01\x00\x00", b"\x00\x03\x00\x0d\x00\x00\x00\x01\x00\x00"],
    ids=["unknown-api-key", "unsupported-version"],
)
def test_unserved_apis_and_versions_close_the_connection(frame: bytes) -> None:
    with pytest.raises(FrameError):
        DISPATCHER.decode(frame)


def _count(name: str, request: str) -> float:
    labels = {"request": request, "listener": "kafka"}
    return REGISTRY.get_sample_value(f"kafka_network_requestmetrics_{name}", labels) or 0.0


def test_each_answered_call_is_counted_and_timed_under_kafkas_api_name() -> None:
    before = (
        _count("requests_total", "ApiVersions"),
        _count("totaltime_seconds_count", "ApiVersions"),
    )
    frame = encode_request(5, ApiVersionsV3(client_software_name="x", client_software_version="1"))
    _answer(frame)
    after = (
        _count("requests_total", "ApiVersions"),
        _count("totaltime_seconds_count", "ApiVersions"),
    )
    assert after == (before[0] + 1, before[1] + 1)
    assert _count("errors_total", "ApiVersions") == 0


def test_a_handler_that_raises_is_counted_as_an_error() -> None:
    errors = _count("errors_total", "Metadata")
    dispatcher = Dispatcher([Api(3, 0, 12, _never)])
    call = dispatcher.decode(
        encode_request(6, MetadataRequest(topics=None, include_topic_authorized_operations=False))[
            SIZE.size :
        ]
    )
    with pytest.raises(AssertionError, match="not called"):
        dispatcher.answer(call, SERVICES, "127.0.0.1")
    assert _count("errors_total", "Metadata") == errors + 1
