"""The error the partition log raises to its callers, carrying Kafka's error code.

`LogError` is a `server_common.errors.ApiError`, so the broker can put it in a response as is:
OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD, INVALID_TIMESTAMP,
FENCED_LEADER_EPOCH, KAFKA_STORAGE_ERROR (the disk failed; the partition is offline until the
broker reopens it), UNKNOWN_SERVER_ERROR (a caller broke the API contract). Callers catch it apart
from other refusals because a log's failure may take its directory offline.
"""

from __future__ import annotations

from pykraft.proto import common_pb2
from pykraft.server_common.errors import ApiError


class LogError(ApiError):
    """A request the log refuses, or a failure of its storage; `error_code` says which."""


def storage_error(message: str) -> LogError:
    """The disk failed under the log (Kafka's KAFKA_STORAGE_ERROR)."""
    return LogError(common_pb2.KAFKA_STORAGE_ERROR, message)
