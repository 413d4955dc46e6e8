"""The HTTP endpoint every server process serves beside gRPC (`metrics.listen = host:port`):
`/metrics` (Prometheus' text format), `/health` and `/ready` (probes).

`/health` answers 200 while the process serves and has not failed (a liveness probe restarts it
otherwise); `/ready` answers 200 when the node may take traffic and 503 with the reason when not
(a broker: unfenced and caught up with metadata; a controller: in a quorum with a known leader).
Each node hands in its own callables, so this module knows nothing of either role.

`/metrics` renders the process-wide default registry (counters that hot paths increment: per
request, per batch, never per record) followed by the node's own registry (collectors that compute
gauges at scrape time from the node's state). Port 0 picks a free port; `address` says which.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final

from prometheus_client import REGISTRY, CollectorRegistry, disable_created_metrics, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from pykraft.server_common.config_files import ConfigError

log = logging.getLogger(__name__)

# What a probe callable returns: None when all is well, else the reason it is not.
Probe = Callable[[], str | None]

METRICS_LISTEN_KEY: Final = "metrics.listen"


def parse_metrics_listen(text: object) -> str:
    """`host:port` (port 0 picks one) or "" (no endpoint); ConfigError otherwise."""
    value = str(text).strip()
    if not value:
        return ""
    host, colon, port = value.rpartition(":")
    if not (colon and host and port.isdigit() and int(port) < 65536):
        raise ConfigError(f"{METRICS_LISTEN_KEY}: {value!r} is not of the form host:port")
    return value


class NodeHttpServer:
    """Serves the three paths of the module docstring on its own daemon threads."""

    def __init__(
        self, listen: str, registry: CollectorRegistry, *, health: Probe, ready: Probe
    ) -> None:
        # Process-wide, as the endpoint is one per process: no `_created` twin of each counter.
        disable_created_metrics()  # type: ignore[no-untyped-call]  # (prometheus-client 0.26)
        host, _, port = listen.rpartition(":")
        handler = _handler_class(registry, health, ready)
        try:
            self._server = ThreadingHTTPServer((host, int(port)), handler)
        except OSError as error:
            raise OSError(f"cannot serve metrics on {listen}: {error}") from error
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-http", daemon=True
        )

    @property
    def address(self) -> str:
        """The bound `host:port` (the picked port when the configured one was 0)."""
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> None:
        self._thread.start()
        log.info("metrics, /health and /ready on http://%s", self.address)

    def stop(self) -> None:
        """Stops answering and closes the socket; idempotent."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


def _handler_class(
    registry: CollectorRegistry, health: Probe, ready: Probe
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                body = generate_latest(REGISTRY) + generate_latest(registry)
                self._answer(200, body, CONTENT_TYPE_LATEST)
            elif path in ("/health", "/ready"):
                reason = (health if path == "/health" else ready)()
                status = 200 if reason is None else 503
                self._answer(status, f"{reason or 'ok'}\n".encode(), "text/plain; charset=utf-8")
            else:
                self._answer(404, b"not found: try /metrics, /health or /ready\n", "text/plain")

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # scrapes every few seconds would drown the node's own log

    return Handler
