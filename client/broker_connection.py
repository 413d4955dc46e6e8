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
from collections.abc import Callable, Mapping

import grpc
from google.protobuf.message import Message

from pykraft.client.broker_calls import CALLS_IN_FLIGHT_MAX, ResponseT, raise_header_error
from pykraft.client.call_threads import CallThreads
from pykraft.client.data_connection import DATA_METHODS, DataConnection
from pykraft.client.errors import KafkaConnectionError, KafkaError
from pykraft.client.transport import open_channel, rpc_error
from pykraft.proto import broker_pb2

_SERVICE = broker_pb2.DESCRIPTOR.services_by_name["BrokerService"]


class BrokerConnection:
    """One broker's channel, and its data plane connection when it has one; thread-safe."""

    def __init__(
        self, address: str, *, retry_backoff_ms: int, data_address: str | None = None
    ) -> None:
        self.address = address
        self._channel = open_channel(address, retry_backoff_ms=retry_backoff_ms)
        self._calls = CallThreads(f"pykraft-call-{address}", CALLS_IN_FLIGHT_MAX)
        self._data_lock = threading.Lock()
        # Read without the lock by each call (one attribute read); replaced under it.
        self._data = None if data_address is None else DataConnection(data_address)

    def use_data_address(self, data_address: str | None) -> None:
        """Produce and Fetch go to `data_address` from now on, over gRPC when None. Another
        address than before closes the old DataConnection (its pending calls fail with
        KafkaConnectionError); the same one keeps it."""
        with self._data_lock:
            old = self._data
            if (None if old is None else old.address) == data_address:
                return
            self._data = None if data_address is None else DataConnection(data_address)
        if old is not None:
            old.close()

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
        data = self._data
        if data is not None and method in DATA_METHODS:
            return data.call(method, request, response_type, timeout_ms)
        stub = self._stub(method, request, response_type)
        try:
            response = stub(request, timeout=max(timeout_ms, 1) / 1000)
        except grpc.RpcError as e:
            raise rpc_error(self.address, e) from None
        raise_header_error(self.address, response.header)
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
        (KafkaConnectionError when the connection was closed first), on a call thread, or for
        Produce and Fetch over the data plane as `DataConnection.call_async` says (on_done
        must not block on this connection)."""
        data = self._data
        if data is not None and method in DATA_METHODS:
            data.call_async(method, request, response_type, timeout_ms, on_done)
            return
        stub = self._stub(method, request, response_type)
        deadline_s = time.monotonic() + max(timeout_ms, 1) / 1000

        def run() -> None:
            try:
                response = stub(request, timeout=max(deadline_s - time.monotonic(), 0.001))
                raise_header_error(self.address, response.header)
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
        still queued fail on the closed channel: each is answered), then the data plane
        connection (its pending calls fail with KafkaConnectionError)."""
        self._channel.close()
        self._calls.close()
        self.use_data_address(None)


class ConnectionPool:
    """Opens a BrokerConnection per address on first use and closes them all at the end."""

    def __init__(self, *, retry_backoff_ms: int) -> None:
        self._retry_backoff_ms = retry_backoff_ms
        self._connections: dict[str, BrokerConnection] = {}
        self._data_addresses: dict[str, str | None] = {}  # gRPC address -> data plane's
        self._lock = threading.Lock()
        self._closed = False

    def get(self, address: str) -> BrokerConnection:
        with self._lock:
            if self._closed:
                raise RuntimeError("the client is closed")
            connection = self._connections.get(address)
            if connection is None:
                connection = BrokerConnection(
                    address,
                    retry_backoff_ms=self._retry_backoff_ms,
                    data_address=self._data_addresses.get(address),
                )
                self._connections[address] = connection
            return connection

    def set_data_addresses(self, data_addresses: Mapping[str, str | None]) -> None:
        """Where each broker named by its gRPC address takes Produce and Fetch, from the
        latest metadata (None: it has no data plane listener; gRPC). Brokers not named keep
        what they had. Open connections switch now, new ones start with it."""
        with self._lock:
            if self._closed:
                return
            self._data_addresses.update(data_addresses)
            for address, data_address in data_addresses.items():
                connection = self._connections.get(address)
                if connection is not None:
                    connection.use_data_address(data_address)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            connection.close()
