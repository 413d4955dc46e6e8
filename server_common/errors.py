"""The one error a server raises for a request it refuses, keyed by Kafka's error code.

Every refusal a broker or controller answers is an `ApiError` (or a subclass, where a caller must
catch one kind apart: the broker's `LogError` and its `LeaderError`, `CoordinatorError`,
`GroupRequestError`; the controller's `OperationTooLarge`); its `error_code` goes into the
response as is, with `message` as the sentence that explains it. This is Kafka's `ApiException`
with `Errors.forCode`. Decisions that answer several items may also return an `ApiError` as a
value instead of raising it.

Responses carry it one way (`error_header`, `fill_error`): the code in `error_code` and the
sentence alone in `error_message`, as Kafka does; clients add the code's name when they print it.
"""

from __future__ import annotations

from typing import Protocol, cast

from pykraft.proto import common_pb2


class ApiError(Exception):
    """A request refused with `error_code` (a `common_pb2.ErrorCode`) and a sentence saying why."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message

    def __str__(self) -> str:
        return f"{common_pb2.ErrorCode.Name(self.error_code)}: {self.message}"


def ok_header() -> common_pb2.ResponseHeader:
    """The header of a response that succeeded."""
    return common_pb2.ResponseHeader(error_code=common_pb2.NONE)


def error_header(error: ApiError) -> common_pb2.ResponseHeader:
    """The header of a response refused as a whole with `error`."""
    return common_pb2.ResponseHeader(error_code=_code(error), error_message=error.message)


class ErrorFields(Protocol):
    """A response header, or one item of a response: any message with Kafka's error fields."""

    error_code: common_pb2.ErrorCode
    error_message: str


def fill_error(target: ErrorFields, error: ApiError) -> None:
    """Puts `error` into `target` (a header or an item), the one way refusals are answered."""
    target.error_code = _code(error)
    target.error_message = error.message


def _code(error: ApiError) -> common_pb2.ErrorCode:
    # Codes arrive as plain ints from lower layers (`record_batch.BatchError`); the stubs type
    # the enum fields narrower than protobuf, which takes any int32.
    return cast(common_pb2.ErrorCode, error.error_code)
