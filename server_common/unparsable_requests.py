"""A request whose bytes do not parse is the caller's fault: INVALID_ARGUMENT with a sentence.

Left to itself, grpc answers a request its deserializer cannot parse with INTERNAL ("Exception
deserializing request!") and logs a traceback, as if the server had failed. Every pykraft
server installs `RefuseUnparsableRequests` as an interceptor (`grpc_server.start_server`): it
wraps the deserializer of each method that takes one request (unary or server-streaming) so a
parse error becomes a marker, and the method answers the marker with INVALID_ARGUMENT naming the
method and the parse error, without running the handler.
"""

from __future__ import annotations

from typing import Any

import grpc

from pykraft.server_common.unary_interceptor import Handler, UnaryInterceptor


class _Unparsable:
    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class RefuseUnparsableRequests(UnaryInterceptor):
    """See the module docstring."""

    def wrap(self, method: str, handler: Handler) -> Handler:
        return handler if handler.request_deserializer is None else _refusing(method, handler)


def _refusing(method: str, handler: Handler) -> Handler:
    deserialize = handler.request_deserializer
    behavior = handler.unary_unary or handler.unary_stream
    assert deserialize is not None and behavior is not None

    def lenient(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception as error:  # protobuf's DecodeError, or bad UTF-8 in a string field
            return _Unparsable(f"{method}: the request is not a valid protobuf message ({error})")

    def serve(request: Any, context: grpc.ServicerContext) -> Any:
        if isinstance(request, _Unparsable):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.reason)
        return behavior(request, context)

    make = (
        grpc.unary_unary_rpc_method_handler
        if handler.unary_unary is not None
        else grpc.unary_stream_rpc_method_handler
    )
    return make(
        serve, request_deserializer=lenient, response_serializer=handler.response_serializer
    )
