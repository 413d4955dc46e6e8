"""The client's shared transport pieces: Kafka's retry backoff and the gRPC error mapping."""

from __future__ import annotations

import grpc
import pytest

from pykraft.client import KafkaConnectionError, UnknownServerError
from pykraft.client.transport import RETRY_BACKOFF_MAX_MS, Backoff, rpc_error


def test_backoff_doubles_up_to_its_cap_and_starts_over_after_a_success() -> None:
    backoff = Backoff(100)
    assert [backoff.next_ms() for _ in range(6)] == [100, 200, 400, 800, 1000, 1000]
    assert RETRY_BACKOFF_MAX_MS == 1000  # Kafka's retry.backoff.max.ms default
    backoff.reset()
    assert backoff.current_ms == 100
    zero = Backoff(0, backoff_ms_max=5)
    assert [zero.next_ms() for _ in range(5)] == [0, 1, 2, 4, 5]  # never stuck at 0


class _Failed(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    def __init__(self, status: grpc.StatusCode) -> None:
        self._status = status

    def code(self) -> grpc.StatusCode:
        return self._status

    def details(self) -> str:
        return "from the test"


@pytest.mark.parametrize(
    ("status", "error_class"),
    [
        (grpc.StatusCode.UNAVAILABLE, KafkaConnectionError),
        (grpc.StatusCode.DEADLINE_EXCEEDED, KafkaConnectionError),
        (grpc.StatusCode.CANCELLED, KafkaConnectionError),
        (grpc.StatusCode.INTERNAL, UnknownServerError),
    ],
)
def test_lost_connections_are_retriable_and_the_rest_is_not(
    status: grpc.StatusCode, error_class: type[Exception]
) -> None:
    error = rpc_error("127.0.0.1:1", _Failed(status))
    assert type(error) is error_class
    assert error.retriable == (error_class is KafkaConnectionError)
    assert "127.0.0.1:1" in str(error) and status.name in str(error)
