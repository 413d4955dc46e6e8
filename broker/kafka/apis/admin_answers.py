"""Forwarding a Kafka admin request to the controller and reading its answer.

The admin APIs translate a Kafka request into pykraft's AdminService request, forward it to the
active controller (`KafkaServices.admin`, as the gRPC admin calls are) and translate the answer
back item by item. Items a Kafka request may carry but pykraft cannot express (manual replica
assignments, APPEND/SUBTRACT) are refused here (`refusal`), before forwarding, and merged back
into the answer in the request's order (`request_items.in_request_order`). Callers may rely on
one result per forwarded item, in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from google.protobuf.message import Message

from pykraft.broker.kafka.api import RequestContext
from pykraft.broker.kafka.entities import kafka_error, kafka_message
from pykraft.proto import common_pb2

Result = TypeVar("Result", bound=Message)


def refusal(result_type: type[Result], code: int, message: str, **key: Any) -> Result:
    """A result item of the controller's answer type, refused here before forwarding."""
    return result_type(error_code=code, error_message=message, **key)


def error_fields(result: Any) -> dict[str, Any]:
    """A controller result item's error as Kafka's `error_code` and `error_message` fields."""
    return {
        "error_code": kafka_error(result.error_code),
        "error_message": kafka_message(result.error_message),
    }


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
