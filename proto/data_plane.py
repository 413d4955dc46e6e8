"""The data plane's own wire: Produce and Fetch as length-prefixed protobuf frames on a plain TCP
connection (issue 17 §5, §7), beside the gRPC listener that serves every other call.

Why: a gRPC call costs a broker 300-400 us of CPU and about nine thread switches in Python
(bench/broker_cpu.py), twenty times what the handler does; a frame on an open socket costs
tens of microseconds. Clients and follower brokers send Produce and Fetch here when the broker
registered a DATA endpoint (`BrokerEndpoint.data_port`), and gRPC otherwise.

A request frame: its length (4 bytes, big-endian, counting what follows), the API (1 byte:
PRODUCE or FETCH), a correlation id (4 bytes, chosen by the client) and the request message
(broker.proto's ProduceRequest or FetchRequest). A response frame: its length, the correlation
id of the request it answers, and the response message (ProduceResponse or FetchResponse),
whose header carries any whole-request error as over gRPC. Responses may come in any order: a
client matches them by correlation id. The server closes a connection whose frame is larger
than REQUEST_BYTES_MAX, names an unknown API or does not parse, as Kafka closes one on an
unreadable request; a client fails every call of a closed connection (retriable).
"""

from __future__ import annotations

import enum
import socket
import struct
from typing import Any, Final, Protocol, TypeVar

# Kafka's socket.request.max.bytes: a larger frame closes the connection.
REQUEST_BYTES_MAX: Final = 104_857_600
# A Fetch answer may hold up to fetch.max.bytes (Kafka's 52428800) plus a message's framing; a
# larger frame is a broken stream and closes the connection.
RESPONSE_BYTES_MAX: Final = 2 * REQUEST_BYTES_MAX

REQUEST_HEADER: Final = struct.Struct(">IBI")  # length, api, correlation id
RESPONSE_HEADER: Final = struct.Struct(">II")  # length, correlation id
# Reads larger than this are taken in pieces, so a large frame is never asked of recv at once.
_RECV_BYTES_MAX: Final = 1 << 20
# Frames with a body up to this size are joined to their header and sent in one call.
_JOIN_BYTES_MAX: Final = 64 * 1024
# Reads up to this size try one recv first (a frame header, a small request or answer).
_SMALL_READ_BYTES: Final = 64 * 1024


ParsedT = TypeVar("ParsedT", covariant=True)


class Parsable(Protocol[ParsedT]):
    """A protobuf message class (or a protocol of one): what `parse` needs."""

    def FromString(self, s: bytes, /) -> ParsedT: ...


class DataApi(enum.IntEnum):
    PRODUCE = 1
    FETCH = 2


class FrameError(Exception):
    """The peer sent what this wire cannot carry: the connection must be closed."""


def parse(message_type: Parsable[ParsedT], body: bytes | bytearray) -> ParsedT:
    """`body` (a frame's message, as read) parsed as `message_type`, without copying it first:
    protobuf's parser takes any buffer, though its stubs say bytes. Raises DecodeError."""
    return message_type.FromString(body)  # type: ignore[arg-type]


def open_socket(address: str) -> tuple[socket.socket, Any]:
    """An unconnected TCP socket for `address` (`host:port`, an IPv6 host in brackets), with
    TCP_NODELAY set, and the address to `connect` it to. Why not connected: a caller keeps it
    where another thread can shut it (`socket.shutdown` aborts a connect in progress), so
    closing a link never waits for a peer that does not answer the handshake."""
    host, _, port = address.rpartition(":")
    family, kind, proto, _, target = socket.getaddrinfo(
        host.strip("[]"), int(port), type=socket.SOCK_STREAM
    )[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock, target


def request_header(api: DataApi, correlation_id: int, body_bytes: int) -> bytes:
    """The bytes before a request message of `body_bytes` (`send_frame` sends both)."""
    return REQUEST_HEADER.pack(body_bytes + 5, api, correlation_id)


def request_frame(api: DataApi, correlation_id: int, body: bytes) -> bytes:
    """One whole request frame around `body`, a serialized request message."""
    return request_header(api, correlation_id, len(body)) + body


def response_header(correlation_id: int, body_bytes: int) -> bytes:
    """The bytes before a response message of `body_bytes` (`send_frame` sends both)."""
    return RESPONSE_HEADER.pack(body_bytes + 4, correlation_id)


def send_frame(sock: socket.socket, header: bytes, body: bytes) -> None:
    """Writes one frame: a small body joined to its header (one segment), a large one after
    it without the copy a join would make. The caller holds the socket's write lock."""
    if len(body) <= _JOIN_BYTES_MAX:
        sock.sendall(header + body)
    else:
        sock.sendall(header)
        sock.sendall(body)


def read_exactly(sock: socket.socket, size: int) -> bytes | bytearray | None:
    """`size` bytes from `sock`; None if the peer closed the connection before the first of
    them (a clean end between frames). A large read lands in one buffer, returned as it is (no
    copy after the kernel's). Raises ConnectionError on a close within them and OSError
    (socket.timeout included) as the socket does."""
    received = 0
    if size <= _SMALL_READ_BYTES:
        first = sock.recv(size)
        if not first or len(first) == size:
            return first or None
        buffer = bytearray(size)
        buffer[: len(first)] = first
        received = len(first)
    else:
        buffer = bytearray(size)
    view = memoryview(buffer)
    while received < size:
        count = sock.recv_into(view[received:], min(size - received, _RECV_BYTES_MAX))
        if not count:
            if received == 0:
                return None
            raise ConnectionError(f"the peer closed the connection {received} of {size} bytes in")
        received += count
    return buffer


def read_request(sock: socket.socket) -> tuple[DataApi, int, bytes | bytearray] | None:
    """The next request frame: (api, correlation id, request bytes); None at a clean end.
    Raises FrameError for a frame this wire refuses, ConnectionError/OSError as the socket."""
    head = read_exactly(sock, REQUEST_HEADER.size)
    if head is None:
        return None
    length, api, correlation_id = REQUEST_HEADER.unpack(head)
    if not 5 <= length <= REQUEST_BYTES_MAX:
        raise FrameError(f"a request frame of {length} bytes (at most {REQUEST_BYTES_MAX})")
    if api not in DataApi.__members__.values():
        raise FrameError(f"unknown data plane API {api}")
    body = read_exactly(sock, length - 5) if length > 5 else b""
    if body is None:
        raise ConnectionError("the peer closed the connection within a frame")
    return DataApi(api), correlation_id, body


def read_response(sock: socket.socket) -> tuple[int, bytes | bytearray] | None:
    """The next response frame: (correlation id, response bytes); None at a clean end. Raises
    FrameError for a frame too large, ConnectionError/OSError as the socket."""
    head = read_exactly(sock, RESPONSE_HEADER.size)
    if head is None:
        return None
    length, correlation_id = RESPONSE_HEADER.unpack(head)
    if not 4 <= length <= RESPONSE_BYTES_MAX:
        raise FrameError(f"a response frame of {length} bytes (at most {RESPONSE_BYTES_MAX})")
    body = read_exactly(sock, length - 4) if length > 4 else b""
    if body is None:
        raise ConnectionError("the peer closed the connection within a frame")
    return correlation_id, body
