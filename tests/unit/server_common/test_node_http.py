"""The HTTP endpoint of `server_common.node_http` served in-process on a picked port, and the
settings and log format every server shares."""

from __future__ import annotations

import io
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from pykraft.server_common.config_files import ConfigError
from pykraft.server_common.node_http import NodeHttpServer, parse_metrics_listen
from pykraft.server_common.process import JsonFormatter, parse_log_format
from pykraft.server_common.request_metrics import observe_request


def get(address: str, path: str) -> tuple[int, str, str]:
    """Status, content type and body of GET http://address/path."""
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


class Probes:
    """Probe answers a test changes while the server runs."""

    def __init__(self) -> None:
        self.health: str | None = None
        self.ready: str | None = "broker state STARTING"


@pytest.fixture
def probes() -> Probes:
    return Probes()


@pytest.fixture
def server(probes: Probes) -> Iterator[NodeHttpServer]:
    registry = CollectorRegistry()
    requests = Counter("node_test_requests", "Requests.", registry=registry)
    requests.inc(3)
    http = NodeHttpServer(
        "127.0.0.1:0", registry, health=lambda: probes.health, ready=lambda: probes.ready
    )
    http.start()
    yield http
    http.stop()


def test_port_zero_picks_one_and_address_names_it(server: NodeHttpServer) -> None:
    host, _, port = server.address.rpartition(":")
    assert host == "127.0.0.1" and int(port) > 0


def test_metrics_render_the_node_registry_and_the_process_counters(
    server: NodeHttpServer,
) -> None:
    observe_request("NodeHttpTest", "grpc", 0.002, failed=True)
    status, content_type, body = get(server.address, "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=")
    lines = body.splitlines()
    assert "node_test_requests_total 3.0" in lines
    # The process-wide registry: the request metrics every gRPC server records into.
    labels = '{listener="grpc",request="NodeHttpTest"}'
    assert f"kafka_network_requestmetrics_requests_total{labels} 1.0" in lines
    assert f"kafka_network_requestmetrics_errors_total{labels} 1.0" in lines
    assert "_created" not in body  # one series per counter, not two


def test_ready_and_health_answer_503_with_the_reason_until_all_is_well(
    server: NodeHttpServer, probes: Probes
) -> None:
    assert get(server.address, "/ready")[::2] == (503, "broker state STARTING\n")
    assert get(server.address, "/health")[::2] == (200, "ok\n")
    probes.ready = None
    probes.health = "failed: every log directory failed"
    assert get(server.address, "/ready")[::2] == (200, "ok\n")
    assert get(server.address, "/health")[::2] == (503, "failed: every log directory failed\n")


def test_other_paths_are_not_found(server: NodeHttpServer) -> None:
    assert get(server.address, "/metricz")[0] == 404


def test_a_taken_port_is_an_os_error_naming_it(server: NodeHttpServer) -> None:
    with pytest.raises(OSError, match=f"cannot serve metrics on {server.address}"):
        NodeHttpServer(server.address, CollectorRegistry(), health=str, ready=str)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", ""), (" 0.0.0.0:9404 ", "0.0.0.0:9404"), ("127.0.0.1:0", "127.0.0.1:0")],
)
def test_metrics_listen_values(text: str, expected: str) -> None:
    assert parse_metrics_listen(text) == expected


@pytest.mark.parametrize("text", ["9404", ":9404", "host:port", "host:70000"])
def test_bad_metrics_listen_values_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match=r"metrics\.listen"):
        parse_metrics_listen(text)


def test_log_format_is_text_or_json() -> None:
    assert parse_log_format("JSON") == "json"
    assert parse_log_format("text") == "text"
    with pytest.raises(ConfigError, match=r"log\.format must be one of text, json"):
        parse_log_format("yaml")


def test_json_logs_are_one_object_per_line_with_the_exception() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("pykraft.test.json")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("two\nlines %d", 7)
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "two\nlines 7"
    assert (first["level"], first["logger"]) == ("WARNING", "pykraft.test.json")
    assert first["time"].endswith("+00:00") and "exception" not in first
    assert second["message"] == "failed" and "ValueError: boom" in second["exception"]
