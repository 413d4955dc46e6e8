"""A tiny data plane listener on 127.0.0.1 for the client's unit tests: a thread per connection
reads request frames (`data_plane.read_request`) and either answers each at once with what
`answer` makes of it, or, with no `answer`, queues it for the test, which answers in any order
(`respond`), writes raw bytes (`send_raw`) or drops the connection (`drop`)."""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.message import Message

from pykraft.proto.data_plane import DataApi, FrameError, read_request, response_header

WAIT_S = 10.0  # how long a test waits for a request to arrive


@dataclass(frozen=True)
class Received:
    """A request frame as the server read it, and the connection to answer on."""

    conn: socket.socket
    api: DataApi
    correlation_id: int
    body: bytes


Answer = Callable[[DataApi, bytes], Message]


class FrameServer:
    def __init__(self, answer: Answer | None = None) -> None:
        self._answer = answer
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.received: queue.Queue[Received] = queue.Queue()
        self.accepted = 0  # connections accepted
        self.ended = 0  # connections whose client closed them (or broke the framing)
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, name="frame-server", daemon=True).start()

    def next_request(self) -> Received:
        """The next request the server read; fails the test after WAIT_S."""
        return self.received.get(timeout=WAIT_S)

    def respond(self, request: Received, message: Message) -> None:
        body = message.SerializeToString()
        request.conn.sendall(response_header(request.correlation_id, len(body)) + body)

    def send_raw(self, request: Received, data: bytes) -> None:
        request.conn.sendall(data)

    def drop(self, request: Received) -> None:
        """Closes the connection `request` came on, as a crashed broker would."""
        with contextlib.suppress(OSError):
            request.conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (close alone may not)
        self._listener.close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self.accepted += 1
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                while (frame := read_request(conn)) is not None:
                    api, correlation_id, read = frame
                    body = bytes(read)
                    if self._answer is None:
                        self.received.put(Received(conn, api, correlation_id, body))
                    else:
                        answer = self._answer(api, body).SerializeToString()
                        conn.sendall(response_header(correlation_id, len(answer)) + answer)
            except (OSError, FrameError):
                pass  # the client went away: counted as an end below
            with self._lock:
                self.ended += 1
