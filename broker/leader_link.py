"""A follower's link to its leader's data plane listener (`pykraft.proto.data_plane`): one
request at a time, as a replica fetcher thread sends them, on one TCP connection opened on first
use and again after any failure.

A fetcher has at most one Fetch in flight, so this needs neither correlation bookkeeping nor a
reader thread (the client's `DataConnection` has both, for pipelined producers): the calling
thread sends the frame and reads the answer itself, with a socket timeout as its deadline.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from google.protobuf.message import DecodeError

from pykraft.proto import broker_pb2
from pykraft.proto.data_plane import (
    DataApi,
    FrameError,
    open_socket,
    parse,
    read_response,
    request_frame,
)


class LinkError(Exception):
    """The call failed (no connection, a timeout, a broken or closed stream, an answer that
    does not parse): its outcome is unknown and the connection is closed."""


class LeaderLink:
    """One leader's data plane address; `fetch` is for one thread at a time, `close` for any."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._socket: socket.socket | None = None
        self._correlation_id = 0
        self._lock = threading.Lock()
        self._closed = False

    def fetch(self, request: broker_pb2.FetchRequest, timeout_s: float) -> broker_pb2.FetchResponse:
        """Sends `request` and waits up to `timeout_s` for its answer; LinkError on failure."""
        try:
            sock = self._connected(timeout_s)
            sock.settimeout(timeout_s)
            self._correlation_id = (self._correlation_id + 1) & 0x7FFF_FFFF
            frame = request_frame(DataApi.FETCH, self._correlation_id, request.SerializeToString())
            sock.sendall(frame)
            answer = read_response(sock)
            if answer is None:
                raise ConnectionError("the leader closed the connection")
            correlation_id, body = answer
            if correlation_id != self._correlation_id:
                raise FrameError(f"an answer to {correlation_id}, not {self._correlation_id}")
            return parse(broker_pb2.FetchResponse, body)
        except (OSError, FrameError, DecodeError) as error:
            self._drop()
            raise LinkError(f"fetch from {self.address}: {error}") from error

    def _connected(self, timeout_s: float) -> socket.socket:
        """The connection, opened if there is none; the connect runs outside the lock with
        the socket already in place, so `close` shuts it (and aborts the connect)."""
        with self._lock:
            if self._closed:
                raise ConnectionError("the link is closed")
            if self._socket is not None:
                return self._socket
            sock, target = open_socket(self.address)
            self._socket = sock
        sock.settimeout(timeout_s)
        sock.connect(target)
        return sock

    def _drop(self) -> None:
        with self._lock:
            sock, self._socket = self._socket, None
        if sock is not None:
            sock.close()

    def close(self) -> None:
        """Closes the connection; a fetch in flight fails at once (the socket is shut)."""
        with self._lock:
            self._closed = True
            sock, self._socket = self._socket, None
        if sock is not None:
            with contextlib.suppress(OSError):  # already broken
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
