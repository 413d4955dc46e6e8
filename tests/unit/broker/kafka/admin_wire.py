"""Calling the Kafka admin handlers through kio's real codec, with a fake controller.

`through_the_wire` encodes a request entity with kio, decodes it, calls the handler, checks the
answer is the response entity of the same key and version, and encodes and decodes that: what
the tests see is what a Kafka client would read. `FakeAdmin` stands in for `AdminForwarder`:
each forwarded call is recorded and answered by the test's function for that method.
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from google.protobuf.message import Message
from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i32Timedelta

from pykraft.broker.config import BrokerConfig
from pykraft.broker.kafka.api import Api, KafkaServices, RequestContext
from pykraft.metadata_log.image import MetadataImage

TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=5))


class FakeAdmin:
    """Answers `forward(method, request)` with `answers[method](request)`; records the calls."""

    def __init__(self, **answers: Callable[[Any], Message]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, Any]] = []

    def forward(self, method: str, request: Message) -> Message:
        self.calls.append((method, request))
        return self.answers[method](request)


def context(
    version: int, admin: FakeAdmin | None = None, image: MetadataImage = MetadataImage.EMPTY
) -> RequestContext:
    config = BrokerConfig(
        node_id=2,
        listener="127.0.0.1:9291",
        log_dirs=(Path("/nonexistent"),),
        controller_bootstrap_servers=("127.0.0.1:9290",),
        cluster_id="test-cluster",
    )
    services = KafkaServices(
        config=config,
        manager=cast(Any, SimpleNamespace(image=image)),
        groups=cast(Any, None),
        producer_ids=cast(Any, None),
        admin=cast(Any, admin),
        clock_ms=lambda: 0,
        wall_clock_ms=lambda: 0,
        may_serve=lambda now_ms: True,
    )
    return RequestContext(services, version, "test-client", "127.0.0.1")


def request_module(key: int, version: int) -> Any:
    """kio's module of API `key`'s request entities at `version`."""
    return load_payload_module(key, version, EntityType.request)


def through_the_wire(api: Api, ctx: RequestContext, request: Any) -> Any:
    """The handler's answer to `request`, both having crossed kio's codec (module docstring)."""
    key, version = api.key, ctx.api_version
    assert api.version_min <= version <= api.version_max
    request_type = load_request_schema(key, version)
    assert type(request) is request_type
    decoded_request = _roundtrip(request_type, request)
    response = api.handle(ctx, decoded_request)
    response_type = load_response_schema(key, version)
    assert type(response) is response_type
    return _roundtrip(response_type, response)


def _roundtrip(entity_type: Any, entity: Any) -> Any:
    buffer = io.BytesIO()
    entity_writer(entity_type)(buffer, entity)
    encoded = buffer.getvalue()
    decoded, size = entity_reader(entity_type)(encoded, 0)
    assert size == len(encoded)
    return decoded


def answer_bytes(api: Api, ctx: RequestContext, request_body: bytes) -> bytes:
    """The handler's encoded answer to a request body another codec encoded (a client's)."""
    request_type = load_request_schema(api.key, ctx.api_version)
    request, size = entity_reader(request_type)(request_body, 0)
    assert size == len(request_body)
    buffer = io.BytesIO()
    entity_writer(load_response_schema(api.key, ctx.api_version))(buffer, api.handle(ctx, request))
    return buffer.getvalue()
