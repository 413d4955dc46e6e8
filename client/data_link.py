"""One TCP connection of a `DataConnection`, from its connect to its end: the socket, the calls
sent on it and not yet answered, a reader thread and a timer thread.

A link never recovers. Its first failure (connect refused or timed out, the connection closed or
reset, a FrameError, an answer that does not parse or answers no pending call, a call past its
deadline, `fail` or `close` from outside) fails every pending call with KafkaConnectionError
(retriable) and shuts the socket; the DataConnection opens a fresh link for the next call. A
call past its deadline ends the link as Kafka's clients close a connection on a request
timeout: answers that come later on it are suspect.

Threads, and what callers may rely on:
- The reader connects (so `send` never waits for a connect: frames sent before the socket is
  up wait in a backlog and go first, in order), then reads response frames and completes the
  call each one answers, on the reader thread.
- Deadlines: one timer thread per link, asleep on a condition until the earliest deadline of
  the pending calls. Not the reader's socket timeout: a blocking recv's timeout is fixed when
  it starts, so a call joining with a nearer deadline than the one the reader waits for would
  be noticed late. Not a thread per call, nor a periodic check: the timer wakes at a deadline
  (of a call perhaps answered since; it then sleeps until the next one) or when a call joins
  whose deadline is earlier than the timer's next wake, which a run of calls with one timeout
  never does.
- Each call's `on_done` runs exactly once: on the reader thread (answers, and failures it
  finds), the timer thread (a deadline), or the thread that calls `fail`/`close` or whose
  send failed. `on_finished` runs just before it (the DataConnection frees the call's slot).
"""

from __future__ import annotations

import contextlib
import logging
import math
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from pykraft.client.broker_calls import BrokerResponse, raise_header_error
from pykraft.client.errors import KafkaConnectionError, KafkaError
from pykraft.proto.data_plane import FrameError, open_socket, parse, read_response, send_frame

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class PendingCall:
    """A call sent (or about to be) on a link: when it fails unanswered, how to read its
    answer, and who gets the answer or the KafkaError."""

    deadline_s: float  # time.monotonic()
    timeout_ms: int
    response_type: type[BrokerResponse]
    on_done: Callable[[Any], None]


def no_answer(timeout_ms: int) -> str:
    """The reason a call fails when its timeout passes."""
    return f"no answer within {timeout_ms} ms"


class Link:
    """One connection's socket, pending calls and threads; thread-safe. `start` once."""

    def __init__(self, address: str, on_finished: Callable[[], None]) -> None:
        self.address = address
        self._on_finished = on_finished
        # Guards the pending calls, the failure, the socket and backlog, the timer's next wake.
        self._state = threading.Condition()
        self._pending: dict[int, PendingCall] = {}
        self._failed = False
        self._sock: socket.socket | None = None  # set once connected, cleared at the end
        self._connecting: socket.socket | None = None  # while the reader connects
        self._backlog: list[tuple[bytes, bytes]] = []  # frames sent before the connect
        self._timer_wake_s = math.inf
        # Held around each write of whole frames, so frames never interleave.
        self._write_lock = threading.Lock()
        name = f"pykraft-data-{address}"
        self._threads = (
            threading.Thread(target=self._read, name=f"{name}-reader", daemon=True),
            threading.Thread(target=self._watch_deadlines, name=f"{name}-timer", daemon=True),
        )

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def add(self, correlation_id: int, call: PendingCall) -> bool:
        """Makes `call` pending under `correlation_id`; False if the link failed (the call is
        not taken: the caller needs a fresh link)."""
        with self._state:
            if self._failed:
                return False
            self._pending[correlation_id] = call
            if call.deadline_s < self._timer_wake_s:
                self._state.notify_all()
            return True

    def send(self, header: bytes, body: bytes) -> None:
        """Writes the frame of `header` and `body`, a request of a call added before (after the
        connect if the socket is not up yet). A failed write fails the link; on a failed link
        it does nothing (the call has its KafkaConnectionError already)."""
        with self._write_lock:
            with self._state:
                if self._failed:
                    return
                sock = self._sock
                if sock is None:
                    self._backlog.append((header, body))
                    return
            try:
                send_frame(sock, header, body)
                return
            except OSError as e:
                reason = f"cannot send to {self.address}: {e}"
        self.fail(reason)  # not under the write lock: on_done may send on a fresh link

    def fail(self, reason: str) -> None:
        """Ends the link: every pending call gets a KafkaConnectionError naming `reason`, the
        socket is shut (the reader wakes and closes it). Later calls of it do nothing."""
        with self._state:
            if self._failed:
                return
            self._failed = True
            calls = list(self._pending.values())
            self._pending.clear()
            for sock in (self._sock, self._connecting):  # shutting aborts a connect too
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
            self._state.notify_all()
        for call in calls:
            self._finish(call, KafkaConnectionError(f"{self.address}: {reason}"))

    def close(self, join_timeout_s: float) -> None:
        """`fail`s the link, then waits up to `join_timeout_s` for each of its threads (a
        reader still connecting ends with its connect timeout, daemon meanwhile)."""
        self.fail("the connection was closed")
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(join_timeout_s)

    # --- the reader thread ---

    def _read(self) -> None:
        reason = "the reader stopped"  # replaced by the cause of any expected end
        sock = None
        try:
            sock = self._connect()
            while sock is not None:
                frame = read_response(sock)
                if frame is None:
                    raise ConnectionError("the broker closed the connection")
                self._answer(*frame)
        except (OSError, FrameError) as e:
            reason = f"connection lost: {type(e).__name__}: {e}"
        finally:
            self.fail(reason)
            if sock is not None:
                with self._write_lock, self._state:
                    self._sock = None
                sock.close()

    def _connect(self) -> socket.socket | None:
        """The connected socket with the backlog sent, or None if the link failed meanwhile.
        The connect may take until the first call's deadline."""
        sock, target = open_socket(self.address)
        with self._state:
            if self._failed:
                sock.close()
                return None
            self._connecting = sock  # `fail` shuts it, which ends the connect at once
            deadline_s = min((c.deadline_s for c in self._pending.values()), default=0.0)
        try:
            sock.settimeout(max(deadline_s - time.monotonic(), 0.001))
            sock.connect(target)
        except OSError:
            sock.close()
            raise
        finally:
            with self._state:
                self._connecting = None
        sock.settimeout(None)  # deadlines are the timer's; `fail` wakes a blocked recv
        with self._write_lock:
            with self._state:
                if self._failed:
                    sock.close()
                    return None
                self._sock = sock
                backlog, self._backlog = self._backlog, []
            for header, body in backlog:
                send_frame(sock, header, body)
        return sock

    def _answer(self, correlation_id: int, body: bytes | bytearray) -> None:
        """Completes the call `correlation_id` names. Raises FrameError when none is pending
        or the answer does not parse (that call fails too)."""
        with self._state:
            call = self._pending.pop(correlation_id, None)
        if call is None:
            raise FrameError(f"an answer to correlation id {correlation_id}, pending for none")
        try:
            response = parse(call.response_type, body)
        except DecodeError as e:
            reason = f"an answer that does not parse: {e}"
            self._finish(call, KafkaConnectionError(f"{self.address}: {reason}"))
            raise FrameError(reason) from None
        try:
            raise_header_error(self.address, response.header)
        except KafkaError as e:
            self._finish(call, e)
        else:
            self._finish(call, response)

    def _finish(self, call: PendingCall, result: BrokerResponse | KafkaError) -> None:
        self._on_finished()
        try:
            call.on_done(result)
        except Exception:  # a failing callback must not take the reader or timer with it
            log.exception("%s: a data plane call's on_done failed", self.address)

    # --- the timer thread ---

    def _watch_deadlines(self) -> None:
        with self._state:
            while not self._failed:
                now_s = time.monotonic()
                first = min(self._pending.values(), key=_deadline_s, default=None)
                if first is not None and first.deadline_s <= now_s:
                    reason = f"{no_answer(first.timeout_ms)}: the connection is closed"
                    break
                self._timer_wake_s = math.inf if first is None else first.deadline_s
                self._state.wait(None if first is None else first.deadline_s - now_s)
            else:
                return
        self.fail(reason)


def _deadline_s(call: PendingCall) -> float:
    return call.deadline_s
