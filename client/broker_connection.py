"""gRPC channels to brokers: one per address, shared by every request the client sends there.

`call` waits for the answer; `call_async` returns at once and hands the answer (or the
KafkaError it maps to) to a callback on one of the connection's kept call threads
(`call_threads.py`: at most CALLS_IN_FLIGHT_MAX calls of a connection run at once), which lets
the producer keep several requests in flight per broker. A response header's error becomes its
KafkaError; gRPC errors never reach the caller (unreachable or too slow: KafkaConnectionError,
which is retriable).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final, Protocol, Self, TypeVar

import grpc
from google.protobuf.message import Message

from pykraft.client.call_threads import CallThreads
from pykraft.client.errors import KafkaConnectionError, KafkaError, error_for
from pykraft.client.transport import open_channel, rpc_error
from pykraft.proto import broker_pb2, common_pb2

# Calls of one connection in flight at once: the producer's window
# (max.in.flight.requests.per.connection, 5) and its InitProducerId, the consumer's fetch and
# offset lookups. A call beyond it waits for one to end (its timeout counts from call_async).
CALLS_IN_FLIGHT_MAX: Final = 8

_SERVICE = broker_pb2.DESCRIPTOR.services_by_name["BrokerService"]


class BrokerResponse(Protocol):
    """What every BrokerService response offers: the header and protobuf's parser."""

    @property
    def header(self) -> common_pb2.ResponseHeader: ...

    @classmethod
    def FromString(cls, s: bytes) -> Self: ...


ResponseT = TypeVar("ResponseT", bound=BrokerResponse)


class BrokerConnection:
    """One broker's channel; thread-safe."""

    def __init__(self, address: str, *, retry_backoff_ms: int) -> None:
        self.address = address
        self._channel = open_channel(address, retry_backoff_ms=retry_backoff_ms)
        self._calls = CallThreads(f"pykraft-call-{address}", CALLS_IN_FLIGHT_MAX)

    def _stub(
        self, method: str, request: Message, response_type: type[ResponseT]
    ) -> grpc.UnaryUnaryMultiCallable[Message, ResponseT]:
        assert method in _SERVICE.methods_by_name, f"BrokerService has no method {method}"
        return self._channel.unary_unary(
            f"/{_SERVICE.full_name}/{method}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=response_type.FromString,
        )

    def call(
        self, method: str, request: Message, response_type: type[ResponseT], timeout_ms: int
    ) -> ResponseT:
        """Sends `request` and waits up to `timeout_ms`; raises KafkaError on any failure."""
        stub = self._stub(method, request, response_type)
        try:
            response = stub(request, timeout=max(timeout_ms, 1) / 1000)
        except grpc.RpcError as e:
            raise rpc_error(self.address, e) from None
        _raise_header_error(self.address, response.header)
        return response

    def call_async(
        self,
        method: str,
        request: Message,
        response_type: type[ResponseT],
        timeout_ms: int,
        on_done: Callable[[ResponseT | KafkaError], None],
    ) -> None:
        """Sends `request`; `on_done` later gets the response or the KafkaError, exactly once
        (KafkaConnectionError when the connection was closed first), on a call thread."""
        stub = self._stub(method, request, response_type)
        deadline_s = time.monotonic() + max(timeout_ms, 1) / 1000

        def run() -> None:
            try:
                response = stub(request, timeout=max(deadline_s - time.monotonic(), 0.001))
                _raise_header_error(self.address, response.header)
            except grpc.RpcError as e:
                on_done(rpc_error(self.address, e))
            except KafkaError as e:
                on_done(e)
            except ValueError:  # gRPC's "Cannot invoke RPC on closed channel!"
                on_done(KafkaConnectionError(f"{self.address}: the connection was closed"))
            else:
                on_done(response)

        self._calls.submit(run)

    def close(self) -> None:
        """Closes the channel (calls in flight end CANCELLED), then the call threads (calls
        still queued fail on the closed channel: each is answered)."""
        self._channel.close()
        self._calls.close()


def _raise_header_error(address: str, header: common_pb2.ResponseHeader) -> None:
    if header.error_code != common_pb2.NONE:
        message = header.error_message or "the whole request failed"
        raise error_for(header.error_code, f"{address}: {message}")


class ConnectionPool:
    """Opens a BrokerConnection per address on first use and closes them all at the end."""

    def __init__(self, *, retry_backoff_ms: int) -> None:
        self._retry_backoff_ms = retry_backoff_ms
        self._connections: dict[str, BrokerConnection] = {}
        self._lock = threading.Lock()
        self._closed = False

    def get(self, address: str) -> BrokerConnection:
        with self._lock:
            if self._closed:
                raise RuntimeError("the client is closed")
            connection = self._connections.get(address)
            if connection is None:
                connection = BrokerConnection(address, retry_backoff_ms=self._retry_backoff_ms)
                self._connections[address] = connection
            return connection

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            connection.close()
