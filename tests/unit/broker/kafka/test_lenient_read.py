"""Requests kio refuses and Kafka reads (found by the Kafka fuzzer; the listener closed the
connection): tagged fields a schema does not know are skipped (KIP-482), and strings that are
not UTF-8 are read with replacement characters, as Kafka's readers do."""

from __future__ import annotations

import struct
import uuid

import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from pykraft.broker.kafka.codec import FrameError, decode_header, decode_request

TOPIC_ID = uuid.UUID(int=42)


def _tags(*tags: tuple[int, bytes]) -> bytes:
    """A tagged-field section (every number below 128, so one varint byte each)."""
    section = bytes([len(tags)])
    for tag, data in tags:
        assert tag < 128 and len(data) < 128
        section += bytes([tag, len(data)]) + data
    return section


def _metadata_v12(header_tags: bytes, topic_tags: bytes, body_tags: bytes) -> bytes:
    """A Metadata v12 request frame (size stripped) for one topic, written byte by byte."""
    header = struct.pack(">hhih", 3, 12, 9, 4) + b"test" + header_tags
    topic = TOPIC_ID.bytes + b"\x07orders" + topic_tags
    return header + b"\x02" + topic + b"\x00\x01" + body_tags


def test_unknown_tags_in_the_header_a_nested_entity_and_the_body_are_skipped() -> None:
    frame = _metadata_v12(
        _tags((100, b"future"), (101, b"")),
        _tags((77, b"\x00" * 20)),
        _tags((5, b"x"), (120, b"\xff\xff")),
    )
    header, body = decode_request(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (3, 12, 9)
    assert header.client_id == "test"
    assert body == MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=TOPIC_ID, name=TopicName("orders")),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
    )
    assert decode_request(_metadata_v12(b"\x00", b"\x00", b"\x00")) == (header, body)


def test_a_header_with_unknown_tags_alone_is_read_with_where_its_body_starts() -> None:
    frame = _metadata_v12(_tags((100, b"abc")), b"\x00", b"\x00")
    header, offset = decode_header(frame, flexible=True)
    assert (header.correlation_id, header.client_id) == (9, "test")
    assert frame[offset:] == b"\x02" + TOPIC_ID.bytes + b"\x07orders\x00\x00\x01\x00"


@pytest.mark.parametrize(
    "frame",
    [
        _metadata_v12(_tags((100, b"abc")), b"\x00", b"\x00")[:19],  # cut inside a tag
        _metadata_v12(b"\x01\x64\x7f", b"\x00", b"\x00"),  # a tag longer than the frame
        _metadata_v12(b"\x00", _tags((77, b"x")), b"")[:-3],  # the body cut after a tag
    ],
    ids=["cut-tag", "tag-past-the-end", "cut-body"],
)
def test_frames_with_unknown_tags_that_do_not_parse_still_raise_frame_error(frame: bytes) -> None:
    with pytest.raises(FrameError):
        decode_request(frame)


def test_strings_that_are_not_utf8_are_read_with_replacement_characters() -> None:
    """Kafka's readers decode strings as Java does, each malformed sequence becoming U+FFFD;
    kio refused them and the listener closed the connection (found by the Kafka fuzzer)."""
    header = struct.pack(">hhih", 3, 12, 9, 4) + b"caf\xe9" + b"\x00"
    topic = TOPIC_ID.bytes + b"\x07ord\xffrs" + b"\x00"
    header_read, body = decode_request(header + b"\x02" + topic + b"\x00\x01\x00")
    assert header_read.client_id == "caf\ufffd"
    assert [t.name for t in body.topics] == ["ord\ufffdrs"]
