"""A request whose bytes do not parse is the caller's fault: INVALID_ARGUMENT with a sentence.

Left to itself, grpc answers a request its deserializer cannot parse with INTERNAL ("Exception
deserializing request!") and logs a traceback, as if the server had failed. Every pykraft
server installs `RefuseUnparsableRequests` as an interceptor (`grpc_server.start_server`): it
wraps each unary method's deserializer so a parse error becomes a marker, and the method answers
the marker with INVALID_ARGUMENT naming the method and the parse error, without running the
handler.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import grpc


class _Unparsable:
    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class RefuseUnparsableRequests(grpc.ServerInterceptor):  # type: ignore[type-arg]
    """See the module docstring. Wrapped handlers are kept per method."""

    def __init__(self) -> None:
        self._wrapped: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        self._lock = threading.Lock()

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        method: str = handler_call_details.method
        with self._lock:
            wrapped = self._wrapped.get(method)
        if wrapped is not None:
            return wrapped
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None or handler.request_deserializer is None:
            return handler
        wrapped = _refusing(method, handler)
        with self._lock:
            self._wrapped[method] = wrapped
        return wrapped


def _refusing(
    method: str, handler: grpc.RpcMethodHandler[Any, Any]
) -> grpc.RpcMethodHandler[Any, Any]:
    deserialize = handler.request_deserializer
    behavior = handler.unary_unary
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

    return grpc.unary_unary_rpc_method_handler(
        serve, request_deserializer=lenient, response_serializer=handler.response_serializer
    )
