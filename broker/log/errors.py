"""The one error the partition log raises to its callers, carrying Kafka's error code.

`LogError.error_code` is a code of `pykraft.proto.common_pb2.ErrorCode`, so the broker can put it
in a response as is: OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD,
INVALID_TIMESTAMP, FENCED_LEADER_EPOCH, KAFKA_STORAGE_ERROR (the disk failed; the partition is
offline until the broker reopens it), UNKNOWN_SERVER_ERROR (a caller broke the API contract).
"""

from __future__ import annotations

from pykraft.proto import common_pb2


class LogError(Exception):
    """A request the log refuses, or a failure of its storage; `error_code` says which."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code

    def __str__(self) -> str:
        name = common_pb2.ErrorCode.Name(self.error_code)
        return f"{name}: {self.args[0]}"


def storage_error(message: str) -> LogError:
    """The disk failed under the log (Kafka's KAFKA_STORAGE_ERROR)."""
    return LogError(common_pb2.KAFKA_STORAGE_ERROR, message)
