"""Request and response frames through kio's codec: headers v1/v2 and v0/v1, ApiVersions quirk."""

from __future__ import annotations

import datetime
import struct

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.api_versions.v3.response import ApiVersionsResponse as ApiVersionsResponseV3
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v1.response import (
    FindCoordinatorResponse as FindCoordinatorResponseV1,
)
from kio.schema.metadata.v4.request import MetadataRequest as MetadataV4
from kio.schema.metadata.v4.request import MetadataRequestTopic
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
from kio.schema.metadata.v12.response import MetadataResponse as MetadataResponseV12
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta

from pykraft.broker.kafka.codec import (
    ERROR_MESSAGE_BYTES_MAX,
    SIZE,
    FrameError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_api,
)

NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


def _strip(frame: bytes) -> bytes:
    (size,) = SIZE.unpack_from(frame)
    assert size == len(frame) - SIZE.size
    return frame[SIZE.size :]


def test_a_non_flexible_request_round_trips_with_header_v1() -> None:
    request = MetadataV4(
        topics=(MetadataRequestTopic(name=TopicName("orders")),), allow_auto_topic_creation=False
    )
    header, body = decode_request(_strip(encode_request(7, request, client_id="app")))
    assert (header.api_key, header.api_version, header.correlation_id) == (3, 4, 7)
    assert header.client_id == "app"
    assert body == request


def test_a_flexible_request_round_trips_with_header_v2_and_a_null_client_id() -> None:
    request = ApiVersionsV3(client_software_name="librdkafka", client_software_version="2.6")
    header, body = decode_request(_strip(encode_request(9, request, client_id=None)))
    assert (header.api_key, header.api_version, header.client_id) == (18, 3, None)
    assert body == request


def test_flexible_responses_carry_header_v1_but_api_versions_header_v0() -> None:
    metadata = MetadataResponseV12(
        throttle_time=NO_THROTTLE,
        brokers=(),
        cluster_id="c",
        controller_id=i32(-1),  # type: ignore[arg-type]
        topics=(),
    )
    frame = _strip(encode_response(5, metadata))
    assert frame[4] == 0  # header v1: the correlation id, then no tagged fields
    assert decode_response(frame, MetadataResponseV12) == (5, metadata)
    versions = ApiVersionsResponseV3(
        error_code=ErrorCode.none,
        api_keys=(),
        throttle_time=NO_THROTTLE,
    )
    frame = _strip(encode_response(6, versions))
    assert frame[:4] == b"\x00\x00\x00\x06" and frame[4] == 0  # error code high byte, no tags
    assert decode_response(frame, ApiVersionsResponseV3) == (6, versions)


@pytest.mark.parametrize(
    "frame",
    [b"\x00", b"\x00\x03\x00\x63\x00\x00\x00\x01", b"\x7f\x00\x00\x00\x00\x00\x00\x01"],
    ids=["short", "unknown-version", "unknown-key"],
)
def test_unreadable_frames_raise_frame_error(frame: bytes) -> None:
    with pytest.raises(FrameError):
        decode_request(frame)


def test_a_truncated_body_raises_frame_error() -> None:
    frame = _strip(
        encode_request(
            1,
            MetadataV12(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
    )
    assert peek_api(frame) == (3, 12)
    with pytest.raises(FrameError):
        decode_request(frame[:-2])
    assert decode_request(_strip(encode_request(1, ApiVersionsV0())))[1] == ApiVersionsV0()


@pytest.mark.parametrize("text", ["q" * 40_000, "é" * 20_000], ids=["ascii", "two-byte"])
def test_an_error_message_too_long_for_a_legacy_string_is_cut_not_fatal(text: str) -> None:
    """A sentence quoting a client's 32 KiB name no longer fits the int16-length string of a
    non-flexible version; kio then refused to write the answer and the connection closed (found
    by the Kafka fuzzer). The answer goes out with the sentence cut, its other fields intact."""
    body = FindCoordinatorResponseV1(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.coordinator_not_available,
        error_message=f"no coordinator for {text}",
        node_id=i32(-1),  # type: ignore[arg-type]
        host="",
        port=i32(-1),
    )
    correlation_id, answer = decode_response(
        _strip(encode_response(5, body)), FindCoordinatorResponseV1
    )
    assert correlation_id == 5
    assert (answer.error_code, answer.node_id, answer.port) == (body.error_code, -1, -1)
    assert answer.error_message.startswith("no coordinator for ")
    assert len(answer.error_message.encode()) <= ERROR_MESSAGE_BYTES_MAX


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">hhih", 2, 1, 5, 1) + b"c" + struct.pack(">ii", -1, -1),
        struct.pack(">hhih", 0, 3, 5, 1)
        + b"c"
        + struct.pack(">hhii", -1, 1, 100, 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">i", -1),
    ],
    ids=["top-level", "nested"],
)
def test_a_null_array_the_schema_does_not_allow_raises_frame_error(frame: bytes) -> None:
    """kio reads a null (-1) length as None for any array, and a handler then failed on it
    (found by the Kafka fuzzer: ListOffsets' topics); Kafka refuses such a request as
    unreadable, and so does the codec, naming the field."""
    with pytest.raises(FrameError, match="null"):
        decode_request(frame)


def test_a_null_array_the_schema_allows_is_read_as_none() -> None:
    frame = struct.pack(">hhih", 3, 4, 5, 1) + b"c" + struct.pack(">ib", -1, 0)
    assert decode_request(frame)[1] == MetadataV4(topics=None, allow_auto_topic_creation=False)
