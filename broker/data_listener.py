"""The data plane listener: Produce and Fetch for pykraft's clients and follower brokers over the
wire of `pykraft.proto.data_plane`, answered by the handlers the gRPC service uses.

Why a listener of its own: a gRPC call costs the broker 300-400 us of CPU and about nine thread
switches in Python, twenty times what the handlers do (bench/broker_cpu.py); here a request is
read and handled on its connection's thread, with no hand-off before the answer is written.

Each connection has two threads. Its reader takes frames in order and handles them: a Produce's
appends happen there, in the order the client sent them (what idempotent sequence numbers
expect); a Fetch is answered there, long poll included (a connection carries one kind of
traffic: a producer's, a consumer's or a follower's). An acks=all Produce whose records are not
yet replicated goes to the connection's acker thread, which waits for the high-water mark and
answers, while the reader goes on with the next request (so the client's pipelined requests
are appended without waiting for each other's replication); at most ACKS_PENDING_MAX wait,
then the reader stops reading (TCP pushes back on the client). Answers may go out of order;
the client matches them by correlation id.

A frame the wire refuses, a request that does not parse, or a handler that raises closes that
connection with a log line (as Kafka closes one on an unreadable request); the client fails its
calls in flight (retriable) and reconnects. At most CONNECTIONS_MAX connections are served; one
beyond that is closed at once. `stop` shuts every connection.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from google.protobuf.message import DecodeError

from pykraft.broker.fetch import handle_fetch_spliced
from pykraft.broker.produce import Appends, append_request, await_acks
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.broker.service import DROPPED_RESPONSE_MESSAGE
from pykraft.proto import broker_pb2
from pykraft.proto.data_plane import (
    DataApi,
    FrameError,
    parse,
    read_request,
    response_header,
    send_frame,
)
from pykraft.server_common.request_metrics import observe_request

log = logging.getLogger(__name__)

CONNECTIONS_MAX: Final = 1000
# Kafka's connections.max.idle.ms: a connection that sends nothing for this long is closed (a
# peer gone without a word, cut off by the network, holds no threads for longer).
CONNECTIONS_MAX_IDLE_MS: Final = 600_000
# acks=all Produce requests of one connection waiting for replication before reading stops.
ACKS_PENDING_MAX: Final = 64
_LISTEN_BACKLOG: Final = 128
_STOP_TIMEOUT_S: Final = 5.0
_METRICS_LISTENER: Final = "data"


@dataclass(frozen=True)
class DataHandlers:
    """What the listener answers with: the broker's replicas and clocks (as the gRPC service's),
    and the test-only dropping of Produce answers (`service.ProduceResponseDropper`)."""

    manager: ReplicaManager
    clock_ms: Callable[[], int]
    wall_clock_ms: Callable[[], int]
    drop_response: Callable[[broker_pb2.ProduceRequest], bool]


class DataListener:
    """Serves Produce and Fetch on host:port once `start` returns (port 0: any free one)."""

    def __init__(self, host: str, port: int, handlers: DataHandlers) -> None:
        self._address = (host, port)
        self._handlers = handlers
        self._socket: socket.socket | None = None
        self._accepter = threading.Thread(target=self._accept, name="data-listener", daemon=True)
        self._connections: set[_Connection] = set()
        self._lock = threading.Lock()
        self._stopping = False
        self.port = port

    def start(self) -> None:
        """Binds and serves; raises OSError if it cannot bind."""
        listening = socket.create_server(self._address, backlog=_LISTEN_BACKLOG)
        self._socket = listening
        self.port = listening.getsockname()[1]
        self._accepter.start()
        log.info("data plane listener on %s:%d", self._address[0], self.port)

    def _accept(self) -> None:
        assert self._socket is not None
        while True:
            try:
                sock, peer = self._socket.accept()
            except OSError:
                return  # stop shut the listening socket
            with self._lock:
                if self._stopping or len(self._connections) >= CONNECTIONS_MAX:
                    log.warning("data plane: refusing %s (%d connections)", peer, CONNECTIONS_MAX)
                    sock.close()
                    continue
                connection = _Connection(self._handlers, sock, f"{peer[0]}:{peer[1]}", self._closed)
                self._connections.add(connection)
            connection.start()

    def _closed(self, connection: _Connection) -> None:
        with self._lock:
            self._connections.discard(connection)

    def stop(self) -> None:
        """Stops accepting and shuts every connection. A connection's thread still in a handler
        (a parked fetch, an acks=all wait) ends when the handler returns: its answer finds the
        socket shut (the replica manager's close ends such waits)."""
        with self._lock:
            self._stopping = True
            connections = list(self._connections)
        if self._socket is not None:
            with contextlib.suppress(OSError):  # wakes the accept (Linux)
                self._socket.shutdown(socket.SHUT_RDWR)
            self._socket.close()
        for connection in connections:
            connection.close()
        self._accepter.join(_STOP_TIMEOUT_S)


class _Connection:
    """One client's connection: its reader and acker threads (see the module docstring)."""

    def __init__(
        self,
        handlers: DataHandlers,
        sock: socket.socket,
        peer: str,
        on_closed: Callable[[_Connection], None],
    ) -> None:
        self._handlers = handlers
        self._on_closed = on_closed
        self._socket = sock
        self._peer = peer
        self._write_lock = threading.Lock()
        self._acks: queue.Queue[tuple[int, Appends, float] | None] = queue.Queue(ACKS_PENDING_MAX)
        self._threads = (
            threading.Thread(target=self._read, name=f"data-read-{peer}", daemon=True),
            threading.Thread(target=self._answer_acks, name=f"data-acks-{peer}", daemon=True),
        )
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(CONNECTIONS_MAX_IDLE_MS / 1000)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        """Ends both threads: the reader sees the socket shut, the acker its end marker."""
        with contextlib.suppress(OSError):  # not connected any more
            self._socket.shutdown(socket.SHUT_RDWR)

    def _read(self) -> None:
        try:
            while (frame := read_request(self._socket)) is not None:
                self._handle(*frame)
        except (FrameError, DecodeError) as error:
            log.warning("data plane: closing %s: %s", self._peer, error)
        except OSError as error:
            log.debug("data plane: %s: %s", self._peer, error)
        except Exception:
            log.exception("data plane: closing %s after a handler failed", self._peer)
        finally:
            self.close()
            self._acks.put(None)  # after what is queued: those answers are still sent
            self._on_closed(self)

    def _handle(self, api: DataApi, correlation_id: int, body: bytes | bytearray) -> None:
        started_s = time.perf_counter()
        handlers = self._handlers
        if api is DataApi.FETCH:
            fetch = parse(broker_pb2.FetchRequest, body)
            answer = handle_fetch_spliced(handlers.manager, fetch, handlers.clock_ms)
            self._send(correlation_id, answer.serialize())
            observe_request(
                "Fetch", _METRICS_LISTENER, time.perf_counter() - started_s, failed=False
            )
            return
        produce = parse(broker_pb2.ProduceRequest, body)
        appends = append_request(
            handlers.manager, produce, handlers.clock_ms, wall_clock_ms=handlers.wall_clock_ms
        )
        if appends.waits:
            self._acks.put((correlation_id, appends, started_s))
        else:
            await_acks(handlers.manager, appends, handlers.clock_ms)  # nothing to wait for
            self._answer_produce(correlation_id, appends, started_s)

    def _answer_acks(self) -> None:
        while (item := self._acks.get()) is not None:
            correlation_id, appends, started_s = item
            try:
                await_acks(self._handlers.manager, appends, self._handlers.clock_ms)
                self._answer_produce(correlation_id, appends, started_s)
            except OSError as error:
                log.debug("data plane: %s: %s", self._peer, error)
                self.close()
            except Exception:  # the reader must not block on a queue nobody drains
                log.exception("data plane: closing %s after an acks=all wait failed", self._peer)
                self.close()
        self._socket.close()

    def _answer_produce(self, correlation_id: int, appends: Appends, started_s: float) -> None:
        if self._handlers.drop_response(appends.request):
            log.warning("data plane: Produce to %s: %s", self._peer, DROPPED_RESPONSE_MESSAGE)
            self.close()
            return
        self._send(correlation_id, appends.response().SerializeToString())
        observe_request("Produce", _METRICS_LISTENER, time.perf_counter() - started_s, failed=False)

    def _send(self, correlation_id: int, body: bytes) -> None:
        with self._write_lock:
            send_frame(self._socket, response_header(correlation_id, len(body)), body)
