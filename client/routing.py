"""Sends AdminService requests to whichever controller is active, wherever that is.

A caller hands over one request; `ControllerRouter.call` keeps trying until a node answers it
or the request timeout runs out:

- NOT_CONTROLLER naming the active controller's address: the request goes there at once (a
  second redirect in a row waits a backoff first, so two nodes with stale views cannot make
  it spin).
- NOT_CONTROLLER naming nobody (an election is under way) or a node that cannot be reached:
  after a backoff, the next bootstrap address.

Backoff starts at `retry_backoff_ms` and doubles up to `RETRY_BACKOFF_MAX_MS` (Kafka's
retry.backoff.max.ms default). When time runs out the last error is raised. Every failure is a
`KafkaError`; gRPC errors never leak to the caller.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, Self, TypeVar

import grpc
from google.protobuf.message import Message

from pykraft.client.errors import (
    KafkaConnectionError,
    KafkaError,
    NotControllerError,
    raise_for,
)
from pykraft.client.transport import Backoff, open_channel, rpc_error
from pykraft.proto import admin_pb2, common_pb2

# A node that accepts connections but never answers may use at most this share of the request
# timeout, so another node still gets a try.
_ATTEMPTS_PER_REQUEST_MIN = 2
_SERVICE = admin_pb2.DESCRIPTOR.services_by_name["AdminService"]


class AdminResponse(Protocol):
    """What every AdminService response offers: the header and protobuf's parser."""

    @property
    def header(self) -> common_pb2.ResponseHeader: ...

    @classmethod
    def FromString(cls, s: bytes) -> Self: ...


ResponseT = TypeVar("ResponseT", bound=AdminResponse)


def parse_bootstrap(bootstrap: str | Sequence[str]) -> list[str]:
    """Splits "h1:p1,h2:p2" (or a list of such strings) into checked "host:port" addresses.

    Raises ValueError naming the bad entry when an address lacks a host or a numeric port.
    """
    parts = [bootstrap] if isinstance(bootstrap, str) else list(bootstrap)
    addresses = [a.strip() for part in parts for a in part.split(",") if a.strip()]
    if not addresses:
        raise ValueError("no bootstrap address given (expected host:port[,host:port...])")
    for address in addresses:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad address {address!r} (expected host:port)")
    return addresses


class ControllerRouter:
    """Channels to the controllers (opened lazily, one per address) and the retry loop."""

    def __init__(
        self, bootstrap: Sequence[str], *, request_timeout_ms: int, retry_backoff_ms: int
    ) -> None:
        assert bootstrap, "at least one bootstrap address"
        assert request_timeout_ms > 0 and retry_backoff_ms >= 0
        self._bootstrap = list(bootstrap)
        self._next_bootstrap_index = 0
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._active: str | None = None  # where the last answered request went
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()
        self._closed = False

    @property
    def attempt_timeout_ms(self) -> int:
        """The longest one attempt may wait; requests carry it as their server-side timeout."""
        return max(1, self._request_timeout_ms // _ATTEMPTS_PER_REQUEST_MIN)

    def call(self, method: str, request: Message, response_type: type[ResponseT]) -> ResponseT:
        """Sends `request` to the active controller; raises the response header's error if any."""
        assert method in _SERVICE.methods_by_name, f"AdminService has no method {method}"
        path = f"/{_SERVICE.full_name}/{method}"
        deadline = time.monotonic() + self._request_timeout_ms / 1000
        backoff = Backoff(self._retry_backoff_ms)
        address = self._active or self._take_bootstrap()
        redirected = False
        previous: KafkaError | None = None
        while True:
            timeout_s = min(deadline - time.monotonic(), self.attempt_timeout_ms / 1000)
            outcome = self._attempt(address, path, request, response_type, timeout_s)
            if not isinstance(outcome, _Retry):
                self._active = address
                raise_for(outcome.header.error_code, outcome.header.error_message)
                return outcome
            if self._active == address:
                self._active = None
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                raise _deadline_error(
                    outcome.error, previous, cut_short=timeout_s < self.attempt_timeout_ms / 1000
                )
            previous = outcome.error
            redirect = outcome.redirect if outcome.redirect != address else ""
            if redirect and not redirected:
                address, redirected = redirect, True
                continue
            time.sleep(min(backoff.next_ms() / 1000, remaining_s))
            redirected = bool(redirect)
            address = redirect or self._take_bootstrap()

    def close(self) -> None:
        """Closes every channel; calls after this raise RuntimeError."""
        with self._lock:
            self._closed = True
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()

    def _take_bootstrap(self) -> str:
        address = self._bootstrap[self._next_bootstrap_index % len(self._bootstrap)]
        self._next_bootstrap_index += 1
        return address

    def _channel(self, address: str) -> grpc.Channel:
        with self._lock:
            if self._closed:
                raise RuntimeError("the client is closed")
            channel = self._channels.get(address)
            if channel is None:
                channel = open_channel(address, retry_backoff_ms=self._retry_backoff_ms)
                self._channels[address] = channel
            return channel

    def _attempt(
        self,
        address: str,
        path: str,
        request: Message,
        response_type: type[ResponseT],
        timeout_s: float,
    ) -> ResponseT | _Retry:
        """One request to one node: its answer, or why and where to try again."""
        stub: grpc.UnaryUnaryMultiCallable[Message, ResponseT] = self._channel(address).unary_unary(
            path,
            request_serializer=type(request).SerializeToString,
            response_deserializer=response_type.FromString,
        )
        try:
            response = stub(request, timeout=max(timeout_s, 0.001))
        except grpc.RpcError as e:
            error = rpc_error(address, e)
            if isinstance(error, KafkaConnectionError):
                return _Retry(error, redirect="")
            raise error from None
        header = response.header
        if header.error_code != common_pb2.NOT_CONTROLLER:
            return response
        message = _not_controller_message(address, header)
        return _Retry(NotControllerError(message), redirect=header.controller_address)


@dataclass(frozen=True)
class _Retry:
    """An attempt that may succeed elsewhere or later; `redirect` names the next node, if known."""

    error: KafkaError
    redirect: str


def _deadline_error(
    last: KafkaError, previous: KafkaError | None, *, cut_short: bool
) -> KafkaError:
    """What a request whose deadline passed raises: its last attempt's error, unless that attempt
    only lost the connection because the request's own deadline cut it short (it had less than
    a whole attempt's time): that says nothing about the cluster, so the attempt before it
    (say, a NOT_CONTROLLER answer) speaks instead."""
    if cut_short and previous is not None and isinstance(last, KafkaConnectionError):
        return previous
    return last


def _not_controller_message(address: str, header: common_pb2.ResponseHeader) -> str:
    if header.controller_address:
        where = f"controller {header.controller_id} at {header.controller_address}"
    else:
        where = "no known active controller"
    detail = f" ({header.error_message})" if header.error_message else ""
    return f"{address} is not the active controller; {where}{detail}"
