"""Answers that write their own wire bytes, for the few where protobuf's way costs copies of bulk
bytes: a `bytes` field set on a message is copied into it, and serializing copies it again.

A handler may answer with a `SelfSerialized` instead of its response message: gRPC then sends
what its `serialize()` returns, which must be the bytes of a valid response message (a reader
parses it as one). `SelfSerializedAnswers`, an interceptor `grpc_server.start_server` installs
on every server, is what tells gRPC; every other answer is serialized as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from pykraft.server_common.unary_interceptor import Handler, UnaryInterceptor


class SelfSerialized:
    """An answer that gives gRPC its own bytes (see the module docstring). A plain class, not
    an ABC: every answer of every server is checked against it, and an ABC's isinstance costs
    a Python-level hook."""

    def serialize(self) -> bytes:
        """The answer's bytes: a response message's wire format."""
        raise NotImplementedError


class SelfSerializedAnswers(UnaryInterceptor):
    """See the module docstring: unary methods whose answer may be a SelfSerialized."""

    def wrap(self, method: str, handler: Handler) -> Handler:
        if handler.unary_unary is None or handler.response_serializer is None:
            return handler
        return grpc.unary_unary_rpc_method_handler(
            handler.unary_unary,
            request_deserializer=handler.request_deserializer,
            response_serializer=_serializer(handler.response_serializer),
        )


def _serializer(serialize: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    def serializer(answer: Any) -> bytes:
        return answer.serialize() if isinstance(answer, SelfSerialized) else serialize(answer)

    return serializer
