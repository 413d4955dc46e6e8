"""Request rate and latency per API, Kafka's RequestMetrics as the Prometheus JMX exporter names
them: `kafka_network_requestmetrics_requests_total{request, listener}` (Kafka's RequestsPerSec:
Prometheus takes the rate) and `kafka_network_requestmetrics_totaltime_seconds{request, listener}`
(Kafka's TotalTimeMs, as a histogram in seconds), plus
`kafka_network_requestmetrics_errors_total{request, listener}` for calls that ended with an
exception or a gRPC status other than OK.

`RequestMetrics` is the gRPC server interceptor (`grpc_server.start_server` installs it on every
server): `request` is the RPC's method name (`Produce`, `BrokerHeartbeat`, ...), `listener` is
"grpc". The Kafka listener records through `observe_request` with listener "kafka" and Kafka's API
names. One counter increment and one histogram observation per request: cheap on the hot path.
"""

from __future__ import annotations

import time
from typing import Any, Final

import grpc
from prometheus_client import Counter, Histogram

from pykraft.server_common.unary_interceptor import Handler, UnaryInterceptor

# Latency buckets (seconds): from a metadata read to a long-polled Fetch (max wait 30 s).
_LATENCY_BUCKETS_S: Final = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

REQUESTS: Final = Counter(
    "kafka_network_requestmetrics_requests",
    "Requests answered, per API (Kafka's RequestsPerSec).",
    ["request", "listener"],
)
ERRORS: Final = Counter(
    "kafka_network_requestmetrics_errors",
    "Requests that ended in an exception or a non-OK gRPC status, per API.",
    ["request", "listener"],
)
TOTAL_TIME: Final = Histogram(
    "kafka_network_requestmetrics_totaltime_seconds",
    "Time from receiving a request to answering it, per API (Kafka's TotalTimeMs).",
    ["request", "listener"],
    buckets=_LATENCY_BUCKETS_S,
)


def observe_request(request: str, listener: str, elapsed_s: float, *, failed: bool) -> None:
    """Counts one answered request of API `request` that took `elapsed_s`."""
    REQUESTS.labels(request, listener).inc()
    TOTAL_TIME.labels(request, listener).observe(elapsed_s)
    if failed:
        ERRORS.labels(request, listener).inc()


class RequestMetrics(UnaryInterceptor):
    """Times every unary RPC under its method's short name. A stream (`BrokerSession`, held
    for a broker's lifetime) has no latency to speak of and passes through."""

    def wrap(self, method: str, handler: Handler) -> Handler:
        if handler.unary_unary is None:
            return handler
        return _timed(method.rpartition("/")[2], handler)


def _timed(name: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
    behavior = handler.unary_unary
    assert behavior is not None

    def serve(request: Any, context: grpc.ServicerContext) -> Any:
        started = time.perf_counter()
        failed = True
        try:
            response = behavior(request, context)
            failed = context.code() not in (None, grpc.StatusCode.OK)  # type: ignore[attr-defined]
            return response
        finally:
            observe_request(name, "grpc", time.perf_counter() - started, failed=failed)

    return grpc.unary_unary_rpc_method_handler(
        serve,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
