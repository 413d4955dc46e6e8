"""What every gRPC call of the client shares: how a channel is opened, how a failed call
becomes a KafkaError (admin calls through `routing`, broker calls through `broker_connection`),
and how long to wait before trying again (`Backoff`).

Channels allow Kafka-sized messages (MESSAGE_BYTES_MAX, as the servers do) and reconnect within
the client's own retry backoff: gRPC's default reconnect backoff grows to two minutes, during
which calls to a restarted node would fail at once. A failed call maps to one of our errors;
only a lost connection (KafkaConnectionError) is retried by callers.
"""

from __future__ import annotations

from typing import Final

import grpc

from pykraft.client.errors import (
    InvalidRequestError,
    KafkaConnectionError,
    KafkaError,
    MessageTooLargeError,
    UnknownServerError,
    UnsupportedVersionError,
)

MESSAGE_BYTES_MAX: Final = 64 * 1024 * 1024
# Kafka's retry.backoff.max.ms default: no retry or reconnect waits longer than this.
RETRY_BACKOFF_MAX_MS: Final = 1000

_CONNECTION_LOST: Final = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)
_ERROR_CLASSES: Final[dict[grpc.StatusCode, type[KafkaError]]] = {
    grpc.StatusCode.UNIMPLEMENTED: UnsupportedVersionError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: MessageTooLargeError,
}


def open_channel(address: str, *, retry_backoff_ms: int) -> grpc.Channel:
    """An insecure channel to `address` that reconnects after `retry_backoff_ms`, at most
    RETRY_BACKOFF_MAX_MS apart."""
    options = [
        ("grpc.max_send_message_length", MESSAGE_BYTES_MAX),
        ("grpc.max_receive_message_length", MESSAGE_BYTES_MAX),
        ("grpc.initial_reconnect_backoff_ms", max(1, retry_backoff_ms)),
        ("grpc.min_reconnect_backoff_ms", max(1, retry_backoff_ms)),
        ("grpc.max_reconnect_backoff_ms", RETRY_BACKOFF_MAX_MS),
    ]
    return grpc.insecure_channel(address, options=options)


def rpc_error(address: str, error: grpc.RpcError) -> KafkaError:
    """Maps a gRPC failure to our errors. A call the server cancelled (it was stopping) is a
    lost connection too: its outcome is unknown, as Kafka's clients treat a disconnect, and
    retrying it is safe with idempotence."""
    status = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (error.details() if isinstance(error, grpc.Call) else None) or str(error)
    if status in _CONNECTION_LOST:
        return KafkaConnectionError(f"cannot reach {address}: {status.name}: {details}")
    return _ERROR_CLASSES.get(status, UnknownServerError)(f"{address}: {status.name}: {details}")


class Backoff:
    """Kafka's retry backoff: `initial_ms` (retry.backoff.ms), doubling after each failure up to
    `backoff_ms_max` (retry.backoff.max.ms). Not thread-safe: callers share one under their
    own lock."""

    def __init__(self, initial_ms: int, backoff_ms_max: int = RETRY_BACKOFF_MAX_MS) -> None:
        assert initial_ms >= 0 and backoff_ms_max >= 1, (initial_ms, backoff_ms_max)
        self._initial_ms = initial_ms
        self._backoff_ms_max = backoff_ms_max
        self.current_ms = initial_ms

    def next_ms(self) -> int:
        """The wait to use now; the one after it is twice as long (at least 1 ms, at most
        `backoff_ms_max`)."""
        wait_ms = self.current_ms
        self.current_ms = min(max(1, wait_ms * 2), self._backoff_ms_max)
        return wait_ms

    def reset(self) -> None:
        """A success: the next wait is `initial_ms` again."""
        self.current_ms = self._initial_ms
