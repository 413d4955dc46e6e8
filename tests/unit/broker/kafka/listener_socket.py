"""A client's side of a test's `KafkaListener` socket: connecting and reading answer frames."""

from __future__ import annotations

import socket

from pykraft.broker.kafka.codec import SIZE
from pykraft.broker.kafka.server import KafkaListener


def connect(listener: KafkaListener) -> socket.socket:
    """A socket connected to `listener` on 127.0.0.1, with a 5 s timeout on every read."""
    return socket.create_connection(("127.0.0.1", listener.port), timeout=5)


def read_frame(sock: socket.socket) -> bytes:
    """The next answer frame's payload (without its size prefix); fails the test when the
    listener closes the connection first."""
    (size,) = SIZE.unpack(_read_exactly(sock, SIZE.size))
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data
