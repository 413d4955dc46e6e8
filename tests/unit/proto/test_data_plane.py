"""The data plane's framing (proto/data_plane.py) over a real socket pair: frames of any size
read whole (a large one straight into one buffer), a clean end between frames, and the frames
a reader refuses."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from pykraft.proto import broker_pb2
from pykraft.proto.data_plane import (
    REQUEST_BYTES_MAX,
    DataApi,
    FrameError,
    parse,
    read_request,
    read_response,
    request_frame,
    response_header,
    send_frame,
)


def sent(data: bytes) -> socket.socket:
    """The reading end of a socket pair whose other end writes `data` (from a thread: more
    than the kernel buffers) and closes."""
    reader, writer = socket.socketpair()

    def write() -> None:
        with writer:
            writer.sendall(data)

    threading.Thread(target=write, daemon=True).start()
    reader.settimeout(10)
    return reader


@pytest.mark.parametrize("body_bytes", [0, 100, 70_000, 3 * 1024 * 1024 + 7])
def test_frames_of_any_size_are_read_whole(body_bytes: int) -> None:
    body = bytes(range(256)) * (body_bytes // 256) + b"x" * (body_bytes % 256)
    frames = request_frame(DataApi.FETCH, 42, body) + response_header(43, len(body)) + body
    with sent(frames) as reader:
        assert read_request(reader) == (DataApi.FETCH, 42, body)
        assert read_response(reader) == (43, body)
        assert read_response(reader) is None  # a clean end between frames


@pytest.mark.parametrize("body_bytes", [10, 64 * 1024, 64 * 1024 + 1, 2 * 1024 * 1024])
def test_send_frame_writes_header_and_body_whole_joined_or_not(body_bytes: int) -> None:
    body = b"b" * body_bytes
    reader, writer = socket.socketpair()
    with reader, writer:
        reader.settimeout(10)
        sender = threading.Thread(
            target=send_frame, args=(writer, response_header(9, len(body)), body)
        )
        sender.start()
        assert read_response(reader) == (9, body)
        sender.join(10)


def test_a_read_message_parses_without_a_copy_first() -> None:
    request = broker_pb2.FetchRequest(replica_id=2, max_wait_ms=500)
    frame = request_frame(DataApi.FETCH, 1, request.SerializeToString())
    with sent(frame) as reader:
        read = read_request(reader)
    assert read is not None
    assert parse(broker_pb2.FetchRequest, read[2]) == request


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (struct.pack(">IBI", REQUEST_BYTES_MAX + 1, DataApi.PRODUCE, 1), FrameError, "at most"),
        (struct.pack(">IBI", 4, DataApi.PRODUCE, 1), FrameError, "of 4 bytes"),
        (struct.pack(">IBI", 5, 9, 1), FrameError, "unknown data plane API 9"),
        (request_frame(DataApi.PRODUCE, 1, b"abc")[:-1], ConnectionError, "closed"),
        (request_frame(DataApi.PRODUCE, 1, b"abc")[:3], ConnectionError, "closed"),
    ],
    ids=["too large", "too small", "unknown API", "cut in the body", "cut in the header"],
)
def test_frames_a_reader_refuses(data: bytes, error: type[Exception], message: str) -> None:
    with sent(data) as reader, pytest.raises(error, match=message):
        read_request(reader)
