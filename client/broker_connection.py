"""gRPC channels to brokers: one per address, shared by every request the client sends there.

`call` waits for the answer; `call_async` returns at once and hands the answer (or the
KafkaError it maps to) to a callback on a gRPC thread, which lets the producer keep several
requests in flight per broker. A response header's error becomes its KafkaError; gRPC errors
never reach the caller (unreachable or too slow: KafkaConnectionError, which is retriable).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, Self, TypeVar

import grpc
from google.protobuf.message import Message

from pykraft.client.errors import KafkaError, error_for
from pykraft.client.transport import open_channel, rpc_error
from pykraft.proto import broker_pb2, common_pb2

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
        """Sends `request`; `on_done` later gets the response or the KafkaError, exactly once."""
        stub = self._stub(method, request, response_type)
        call = stub.future(request, timeout=max(timeout_ms, 1) / 1000)

        def done(finished: grpc.Future[ResponseT]) -> None:
            try:
                response = finished.result()
                _raise_header_error(self.address, response.header)
            except grpc.RpcError as e:
                on_done(rpc_error(self.address, e))
            except KafkaError as e:
                on_done(e)
            else:
                on_done(response)

        call.add_done_callback(done)

    def close(self) -> None:
        self._channel.close()


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
