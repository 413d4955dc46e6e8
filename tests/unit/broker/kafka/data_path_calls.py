"""Calls the data-path handlers (Produce, Fetch, ListOffsets, InitProducerId,
OffsetForLeaderEpoch) the way the listener does, through kio's real codec: the request entity
is encoded and decoded before the handler sees it, and the response is encoded and decoded
before the test does, so every test also proves the entities survive the wire."""

from __future__ import annotations

import io
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from pykraft.broker.admin_forwarding import AdminForwarder
from pykraft.broker.config import BrokerConfig
from pykraft.broker.controller_channel import monotonic_ms
from pykraft.broker.group.handlers import GroupHandlers
from pykraft.broker.kafka.api import Api, KafkaServices, RequestContext
from pykraft.broker.producer_ids import ProducerIdAllocator
from pykraft.broker.replica_manager import ReplicaManager

from ..replica_harness import wall_clock_ms
from ..test_producer_ids import FakeController, allocator


def services(
    manager: ReplicaManager,
    tmp_path: Path,
    *,
    controller: FakeController | None = None,
    may_serve: bool = True,
) -> KafkaServices:
    """Broker 1's services over `manager`; groups and admin are not used by these APIs."""
    config = BrokerConfig(
        node_id=1,
        listener="127.0.0.1:9191",
        log_dirs=(tmp_path / "unused",),
        controller_bootstrap_servers=("127.0.0.1:9091",),
        request_timeout_ms=2_000,
    )
    ids: ProducerIdAllocator = allocator(controller or FakeController(), monotonic_ms)
    return KafkaServices(
        config=config,
        manager=manager,
        groups=cast(GroupHandlers, None),
        producer_ids=ids,
        admin=cast(AdminForwarder, None),
        clock_ms=monotonic_ms,
        wall_clock_ms=wall_clock_ms,
        may_serve=lambda now_ms: may_serve,
    )


def request_types(key: int, version: int) -> ModuleType:
    """kio's module of request classes for API `key` at `version`."""
    return load_payload_module(key, version, EntityType.request)


def _encode(cls: type[Any], entity: Any) -> bytes:
    assert type(entity) is cls, (type(entity), cls)
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, entity)
    return buffer.getvalue()


def _decode(cls: type[Any], encoded: bytes) -> Any:
    decoded, size = entity_reader(cls)(encoded, 0)
    assert size == len(encoded)
    return decoded


def call_wire(api: Api, services: KafkaServices, version: int, body: bytes) -> bytes | None:
    """The encoded response body to an encoded request body, as the listener answers it (None:
    no response), so clients' own codecs can be checked against the handlers."""
    assert api.version_min <= version <= api.version_max, (api, version)
    decoded = _decode(load_request_schema(api.key, version), body)
    context = RequestContext(services, version, "test-client", "127.0.0.1")
    response = api.handle(context, decoded)
    if response is None:
        return None
    return _encode(load_response_schema(api.key, version), response)


def call(api: Api, services: KafkaServices, version: int, request: Any) -> Any:
    """The handler's response to `request` (a kio entity of `version`), both through the codec;
    None when the handler sends no response (Produce with acks=0)."""
    body = _encode(load_request_schema(api.key, version), request)
    response = call_wire(api, services, version, body)
    if response is None:
        return None
    return _decode(load_response_schema(api.key, version), response)
