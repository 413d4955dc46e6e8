"""Requests to a consumer group's coordinator: the broker that leads the `__consumer_offsets`
partition the group id hashes to, found with FindCoordinator (which any broker answers).

`CoordinatorClient.call(group_id, method, request, response_type, timeout_ms)` sends one
BrokerService request to the group's coordinator and retries, with exponential backoff up to
RETRY_BACKOFF_MAX_MS, while the error says the coordinator moved or is getting ready:
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and unreachable brokers forget the coordinator and
find it again; COORDINATOR_LOAD_IN_PROGRESS waits and asks the same broker. Any other error is
raised at once; when time runs out the last retriable error is raised. Errors are looked for in
the response header and, for requests that carry several groups (ConsumerGroupDescribe,
DeleteGroups), in each item: pass `item_errors` to name them.

Thread-safe: the consumer's heartbeat thread and its application thread share one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Final, TypeVar

from google.protobuf.message import Message

from pykraft.client.broker_calls import BrokerResponse
from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.clock import monotonic_ms
from pykraft.client.cluster_metadata import ClusterMetadata
from pykraft.client.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaConnectionError,
    KafkaError,
    NotCoordinatorError,
    RequestTimedOutError,
    raise_for,
)
from pykraft.client.transport import Backoff
from pykraft.proto import group_pb2

GROUP_KEY_TYPE: Final = 0
# Errors after which the coordinator is looked up again.
_MOVED: Final = (NotCoordinatorError, CoordinatorNotAvailableError, KafkaConnectionError)

ResponseT = TypeVar("ResponseT", bound=BrokerResponse)
# (error code, message) pairs found inside a response's items.
ItemErrors = Callable[[ResponseT], Iterable[tuple[int, str]]]


class CoordinatorClient:
    """Coordinator addresses by group id, and the retry loop of the module docstring."""

    def __init__(
        self,
        metadata: ClusterMetadata,
        pool: ConnectionPool,
        *,
        request_timeout_ms: int,
        retry_backoff_ms: int,
    ) -> None:
        self._metadata = metadata
        self._pool = pool
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._coordinators: dict[str, str] = {}
        self._lock = threading.Lock()

    def coordinator(self, group_id: str, timeout_ms: int) -> tuple[int, str]:
        """(broker id, address) of the group's coordinator, asked afresh."""
        response = self._find(group_id, monotonic_ms() + timeout_ms)
        return response.node_id, f"{response.host}:{response.port}"

    def forget(self, group_id: str) -> None:
        """The coordinator answered as if it were no longer one: look it up next time."""
        with self._lock:
            self._coordinators.pop(group_id, None)

    def call(
        self,
        group_id: str,
        method: str,
        request: Message,
        response_type: type[ResponseT],
        timeout_ms: int,
        *,
        item_errors: ItemErrors[ResponseT] | None = None,
    ) -> ResponseT:
        """Sends `request` to the group's coordinator; see the module docstring."""
        deadline_ms = monotonic_ms() + timeout_ms
        backoff = Backoff(self._retry_backoff_ms)
        while True:
            try:
                address = self._address(group_id, deadline_ms)
                left_ms = max(1, min(deadline_ms - monotonic_ms(), self._request_timeout_ms))
                response = self._pool.get(address).call(method, request, response_type, left_ms)
                for code, message in item_errors(response) if item_errors else ():
                    raise_for(code, f"{address}: {message}")
                return response
            except KafkaError as error:
                if not error.retriable:
                    raise
                if isinstance(error, _MOVED):
                    self.forget(group_id)
                elif not isinstance(error, CoordinatorLoadInProgressError):
                    raise
                left_ms = deadline_ms - monotonic_ms()
                if left_ms <= 0:
                    raise
                time.sleep(min(backoff.next_ms(), left_ms) / 1000)

    def _address(self, group_id: str, deadline_ms: int) -> str:
        with self._lock:
            address = self._coordinators.get(group_id)
        if address is None:
            found = self._find(group_id, deadline_ms)
            address = f"{found.host}:{found.port}"
            with self._lock:
                self._coordinators[group_id] = address
        return address

    def _find(self, group_id: str, deadline_ms: int) -> group_pb2.FindCoordinatorResponse:
        """FindCoordinator, asked of any broker, retried until `deadline_ms`."""
        request = group_pb2.FindCoordinatorRequest(key=group_id, key_type=GROUP_KEY_TYPE)
        backoff = Backoff(self._retry_backoff_ms)
        while True:
            left_ms = deadline_ms - monotonic_ms()
            if left_ms <= 0:
                raise RequestTimedOutError(f"no coordinator found for group {group_id!r} in time")
            address = self._metadata.any_broker_address()
            try:
                return self._pool.get(address).call(
                    "FindCoordinator",
                    request,
                    group_pb2.FindCoordinatorResponse,
                    min(left_ms, self._request_timeout_ms),
                )
            except KafkaError as error:
                if not error.retriable or deadline_ms - monotonic_ms() <= 0:
                    raise
                self._metadata.request_update()
                self._metadata.maybe_refresh(monotonic_ms())
            time.sleep(min(backoff.next_ms(), max(0, deadline_ms - monotonic_ms())) / 1000)
