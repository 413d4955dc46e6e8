"""What the Kafka admin APIs share: forwarding to the controller and reading its answer.

The admin APIs translate a Kafka request into pykraft's AdminService request, forward it to the
active controller (`KafkaServices.admin`, as the gRPC admin calls are) and translate the answer
back item by item. Items a Kafka request may carry but pykraft cannot express (manual replica
assignments, APPEND/SUBTRACT) are refused here, before forwarding, and merged back into the
answer in the request's order. Callers may rely on one result per request item, in order.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from google.protobuf.message import Message
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from pykraft.broker.kafka.api import RequestContext
from pykraft.proto import common_pb2

NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))

Result = TypeVar("Result", bound=Message)


def timeout_ms(timeout: datetime.timedelta) -> int:
    """A Kafka request's timeout field in milliseconds, as the protobuf requests take it."""
    return int(timeout.total_seconds() * 1000)


def kafka_error(code: int) -> ErrorCode:
    """Kafka's error code of a pykraft `ErrorCode` (same numbers); unknown ones become
    UNKNOWN_SERVER_ERROR rather than a value kio cannot encode."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.unknown_server_error


def kafka_message(message: str) -> str | None:
    """An error message as Kafka sends it: null when there is none."""
    return message or None


def refusal(result_type: type[Result], code: int, message: str, **key: Any) -> Result:
    """A result item of the controller's answer type, refused here before forwarding."""
    return result_type(error_code=code, error_message=message, **key)


def forward_items(
    ctx: RequestContext,
    method: str,
    request: Message,
    field: str,
    keys: Sequence[Mapping[str, Any]],
) -> list[Any]:
    """Forwards `request` and returns its result items, one per forwarded item in order.

    `keys` identify the forwarded items (e.g. `{"name": ...}`), so that an answer refused as a
    whole (no active controller: its header carries the error and no items) still gives each
    item a result with that error. Nothing is forwarded when there is no item.
    """
    if not keys:
        return []
    answer = ctx.services.admin.forward(method, request)
    items = list(getattr(answer, field))
    if len(items) == len(keys):
        return items
    header: common_pb2.ResponseHeader = answer.header  # type: ignore[attr-defined]
    code = header.error_code or common_pb2.UNKNOWN_SERVER_ERROR
    message = header.error_message or f"The controller answered {len(items)} of {len(keys)}."
    stand_in = type(answer)()
    return [
        getattr(stand_in, field).add(error_code=code, error_message=message, **key) for key in keys
    ]


def in_request_order(count: int, refused: Mapping[int, Any], forwarded: Sequence[Any]) -> list[Any]:
    """The results of `count` request items: item i's refusal when refused here, else the next
    forwarded result (forwarded items keep the request's order)."""
    answers = iter(forwarded)
    return [refused[i] if i in refused else next(answers) for i in range(count)]
