"""Produce and Fetch to one broker over its data plane listener (`proto/data_plane.py`, issue 17
§5/§7): request frames on one plain TCP connection (TCP_NODELAY), answers matched by
correlation id in whatever order they come. A gRPC call costs the broker 300-400 us of CPU and
about nine thread switches; a frame costs tens of microseconds.

`DataConnection` mirrors `BrokerConnection.call`/`call_async` for those two methods, with the
same errors: a response header's error is its KafkaError (`broker_calls.raise_header_error`),
and every failure of the connection, a request timeout included, is KafkaConnectionError
(retriable), after which the next call opens a fresh connection (`data_link.py` holds one
connection's life and says which thread runs what). The connection opens on the first call,
within that call's timeout; at most CALLS_IN_FLIGHT_MAX calls are pending, a call beyond it
waits for a slot (its timeout counting). Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

from google.protobuf.message import Message

from pykraft.client.broker_calls import CALLS_IN_FLIGHT_MAX, ResponseT
from pykraft.client.data_link import Link, PendingCall, no_answer
from pykraft.client.errors import KafkaConnectionError, KafkaError
from pykraft.proto.data_plane import DataApi, request_header

# The BrokerService methods the data plane carries, and their API byte.
DATA_METHODS: Final = {"Produce": DataApi.PRODUCE, "Fetch": DataApi.FETCH}
_CORRELATION_IDS: Final = 1 << 32  # a correlation id is 4 bytes on the wire
# How long `close` waits for a connection's reader and timer threads to end.
_CLOSE_JOIN_MS: Final = 1000
# How long past its timeout a blocking call waits for the timer's verdict before it gives up
# by itself (the timer fails it at its deadline; this only bounds the wait).
_VERDICT_GRACE_MS: Final = 1000


class DataConnection:
    """Produce and Fetch calls to one data plane address (`host:port`)."""

    def __init__(self, address: str, *, calls_in_flight_max: int = CALLS_IN_FLIGHT_MAX) -> None:
        assert calls_in_flight_max >= 1, calls_in_flight_max
        self.address = address
        self._calls_in_flight_max = calls_in_flight_max
        # Guards the slots, the current link, the correlation ids and `_closed`.
        self._lock = threading.Condition()
        self._in_flight = 0
        self._link: Link | None = None
        self._next_correlation_id = 0
        self._closed = False

    def call(
        self, method: str, request: Message, response_type: type[ResponseT], timeout_ms: int
    ) -> ResponseT:
        """Sends `request` and waits up to `timeout_ms`; raises KafkaError on any failure."""
        done = threading.Event()
        results: list[ResponseT | KafkaError] = []

        def on_done(result: ResponseT | KafkaError) -> None:
            results.append(result)
            done.set()

        self.call_async(method, request, response_type, timeout_ms, on_done)
        if not done.wait((max(timeout_ms, 1) + _VERDICT_GRACE_MS) / 1000):
            raise KafkaConnectionError(f"{self.address}: {no_answer(timeout_ms)}")
        result = results[0]
        if isinstance(result, KafkaError):
            raise result
        return result

    def call_async(
        self,
        method: str,
        request: Message,
        response_type: type[ResponseT],
        timeout_ms: int,
        on_done: Callable[[ResponseT | KafkaError], None],
    ) -> None:
        """Sends `request`; `on_done` gets the response or the KafkaError exactly once. It may
        run on the connection's reader or timer thread, or on this thread when the call fails
        before it is sent (closed, no slot within `timeout_ms`): it must not block on this
        connection (a call from it may wait for a slot only the reader can free)."""
        api = DATA_METHODS[method]
        body = request.SerializeToString()
        deadline_s = time.monotonic() + max(timeout_ms, 1) / 1000
        call = PendingCall(deadline_s, timeout_ms, response_type, on_done)
        try:
            link, correlation_id = self._admit(call)
        except KafkaConnectionError as e:
            on_done(e)
            return
        link.send(request_header(api, correlation_id, len(body)), body)

    def _admit(self, call: PendingCall) -> tuple[Link, int]:
        """Waits for a slot, then makes `call` pending on the current link (a fresh one if
        there is none or it failed). Raises KafkaConnectionError when closed or no slot frees
        before the call's deadline."""
        with self._lock:
            while not self._closed and self._in_flight >= self._calls_in_flight_max:
                left_s = call.deadline_s - time.monotonic()
                if left_s <= 0:
                    reason = f"{no_answer(call.timeout_ms)} ({self._in_flight} calls pending)"
                    raise KafkaConnectionError(f"{self.address}: {reason}")
                self._lock.wait(left_s)
            if self._closed:
                raise KafkaConnectionError(f"{self.address}: the connection was closed")
            self._in_flight += 1
            correlation_id = self._next_correlation_id
            self._next_correlation_id = (correlation_id + 1) % _CORRELATION_IDS
            link = self._link
            if link is None or not link.add(correlation_id, call):
                link = self._link = Link(self.address, self._slot_freed)
                link.add(correlation_id, call)
                link.start()
            return link, correlation_id

    def _slot_freed(self) -> None:
        with self._lock:
            self._in_flight -= 1
            self._lock.notify()

    def close(self) -> None:
        """Fails the pending calls (KafkaConnectionError), closes the socket and waits a
        bounded time for the connection's threads; later calls fail at once."""
        with self._lock:
            self._closed = True
            link, self._link = self._link, None
            self._lock.notify_all()
        if link is not None:
            link.close(_CLOSE_JOIN_MS / 1000)
