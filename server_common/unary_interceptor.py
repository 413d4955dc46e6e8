"""The shape every pykraft server interceptor shares: each method's handler that takes one request
(unary-unary, or unary-stream: `BrokerSession`) is wrapped once, on its first call, and the
wrapped handler is kept per method; any other kind passes through unwrapped."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeAlias

import grpc

# grpc's stub generics exist for the type checker only: a string keeps runtime from indexing.
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


class UnaryInterceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]
    """Subclasses say how to wrap a unary handler (`wrap`); this class caches the result."""

    def __init__(self) -> None:
        self._wrapped: dict[str, Handler] = {}
        self._lock = threading.Lock()

    def wrap(self, method: str, handler: Handler) -> Handler:
        """The handler that serves `method` (its full name, /package.Service/Method) instead of
        `handler`, a unary-unary or unary-stream one."""
        raise NotImplementedError

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Handler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        method: str = handler_call_details.method
        with self._lock:
            wrapped = self._wrapped.get(method)
        if wrapped is not None:
            return wrapped
        handler = continuation(handler_call_details)
        if handler is None or (handler.unary_unary is None and handler.unary_stream is None):
            return handler
        wrapped = self.wrap(method, handler)
        with self._lock:
            self._wrapped[method] = wrapped
        return wrapped
