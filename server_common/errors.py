"""The one error a server raises for a request it refuses, keyed by Kafka's error code.

Every refusal a broker or controller answers is an `ApiError` (or a subclass, where a caller must
catch one kind apart); its `error_code` goes into the response as is, with `message` as the
sentence that explains it. This is Kafka's `ApiException` with `Errors.forCode`.
"""

from __future__ import annotations

from pykraft.proto import common_pb2


class ApiError(Exception):
    """A request refused with `error_code` (a `common_pb2.ErrorCode`) and a sentence saying why."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message

    def __str__(self) -> str:
        return f"{common_pb2.ErrorCode.Name(self.error_code)}: {self.message}"
