"""The RPCs, read from the service descriptors, and what every answer to a fuzzed request must
satisfy.

A call is sent as raw bytes (identity serializers), so a request the server cannot even parse
travels the same way as a well-formed one. Its outcome is acceptable when it is a response
whose errors each carry a sentence and none is UNKNOWN_SERVER_ERROR (a caught exception), or a
gRPC status that names the fault (INVALID_ARGUMENT and friends); never UNKNOWN or INTERNAL (an
uncaught exception), DEADLINE_EXCEEDED (a hang) or UNAVAILABLE (a dead node).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
from google.protobuf.descriptor import FileDescriptor, ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from pykraft.proto import admin_pb2, broker_pb2, common_pb2, controller_pb2, group_pb2

from .messages import Descriptor, field_of

PROTO_FILES: tuple[FileDescriptor, ...] = (
    admin_pb2.DESCRIPTOR,
    broker_pb2.DESCRIPTOR,
    controller_pb2.DESCRIPTOR,
    group_pb2.DESCRIPTOR,
    common_pb2.DESCRIPTOR,
)
# Which services each kind of node serves (quorum/service.py, broker/service.py).
NODE_SERVICES: dict[str, tuple[str, ...]] = {
    "controller": ("AdminService", "ControllerService"),
    "broker": ("BrokerService", "AdminService"),
}
ACCEPTABLE_STATUSES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)
CALL_TIMEOUT_S = 10.0

# Requests sent per RPC ("Service.Method@node") in this session; printed at its end.
REQUEST_COUNTS: Counter[str] = Counter()


@dataclass(frozen=True)
class Rpc:
    service: str
    method: str
    request: Descriptor
    response: Descriptor
    server_streaming: bool = False  # its answer is a stream (BrokerSession): the first counts

    @property
    def name(self) -> str:
        return f"{self.service}.{self.method}"

    @property
    def path(self) -> str:
        return f"/pykraft.{self.service}/{self.method}"


def services() -> Iterator[ServiceDescriptor]:
    for file in PROTO_FILES:
        yield from file.services_by_name.values()


def all_rpcs() -> list[Rpc]:
    """Every method of every service in the proto files."""
    return [
        Rpc(
            service.name,
            method.name,
            method.input_type,
            method.output_type,
            method.server_streaming,
        )
        for service in services()
        for method in service.methods
    ]


def node_rpcs(kind: str) -> list[Rpc]:
    return [rpc for rpc in all_rpcs() if rpc.service in NODE_SERVICES[kind]]


@dataclass(frozen=True)
class Outcome:
    response: Message | None
    status: grpc.StatusCode | None
    details: str


def call_raw(channel: grpc.Channel, rpc: Rpc, payload: bytes, node: str) -> Outcome:
    """Sends `payload` as the request of `rpc`; counts it under `rpc.name@node`."""
    REQUEST_COUNTS[f"{rpc.name}@{node}"] += 1
    try:
        raw = _first_answer(channel, rpc, payload)
    except grpc.RpcError as error:
        code = error.code()
        return Outcome(None, code, str(error.details()))
    assert isinstance(raw, bytes)
    try:
        response = GetMessageClass(rpc.response).FromString(raw)
    except DecodeError as error:
        raise AssertionError(f"{rpc.name} answered bytes that do not parse: {error}") from None
    return Outcome(response, None, "")


def _first_answer(channel: grpc.Channel, rpc: Rpc, payload: bytes) -> object:
    """The answer's bytes; of a stream, its first message (the stream is then cancelled: a
    fuzzed request that a node took would hold it open)."""
    identity = {"request_serializer": lambda data: data, "response_deserializer": lambda data: data}
    if not rpc.server_streaming:
        return channel.unary_unary(rpc.path, **identity)(payload, timeout=CALL_TIMEOUT_S)
    stream = channel.unary_stream(rpc.path, **identity)(payload, timeout=CALL_TIMEOUT_S)
    try:
        return next(iter(stream))
    except StopIteration:
        raise AssertionError(f"{rpc.name} ended its stream without an answer") from None
    finally:
        stream.cancel()


def _error_items(message: Message) -> Iterator[Message]:
    """Every message in the tree that carries an error_code, the header included."""
    fields = message.DESCRIPTOR.fields_by_name
    if "error_code" in fields:
        yield message
    for field, value in message.ListFields():
        if field.message_type is None or field.message_type.GetOptions().map_entry:
            continue
        for child in value if field.is_repeated else [value]:
            yield from _error_items(child)


def problems(outcome: Outcome) -> list[str]:
    """Why `outcome` is not an acceptable answer to a bad request (empty: it is)."""
    if outcome.response is None:
        assert outcome.status is not None
        if outcome.status in ACCEPTABLE_STATUSES and outcome.details:
            return []
        return [f"gRPC status {outcome.status.name}: {outcome.details!r}"]
    found = []
    for item in _error_items(outcome.response):
        code = field_of(item, "error_code")
        if code == common_pb2.UNKNOWN_SERVER_ERROR:
            found.append(f"UNKNOWN_SERVER_ERROR in {item.DESCRIPTOR.name}: {item}")
        elif (
            code != common_pb2.NONE
            and "error_message" in item.DESCRIPTOR.fields_by_name
            and not field_of(item, "error_message")
        ):
            name = common_pb2.ErrorCode.Name(code) if code in _CODES else str(code)
            found.append(f"{name} without a sentence in {item.DESCRIPTOR.name}")
    return found


_CODES = frozenset(common_pb2.ErrorCode.values())


def accepted_items(outcome: Outcome) -> list[str]:
    """What the server took from the request: nothing when it refused it as a whole (a gRPC
    status, or an error in the header); else each item (a message with an error_code below the
    header) answered NONE. A response without items is taken whole when its header says NONE."""
    if outcome.response is None:
        return []
    header = getattr(outcome.response, "header", None)
    if header is not None and header.error_code != common_pb2.NONE:
        return []
    items = [item for item in _error_items(outcome.response) if item is not header]
    if not items and _has_item_type(outcome.response.DESCRIPTOR):
        return []  # a request naming no items: nothing to take
    if not items:
        return [f"the whole request ({outcome.response.DESCRIPTOR.name} with header NONE)"]
    return [
        str(item).replace("\n", " ")
        for item in items
        if field_of(item, "error_code") == common_pb2.NONE
    ]


def _has_item_type(descriptor: Descriptor, depth: int = 0) -> bool:
    for field in descriptor.fields:
        child = field.message_type
        if child is None or field.name == "header" or depth > 4:
            continue
        if "error_code" in child.fields_by_name or _has_item_type(child, depth + 1):
            return True
    return False
