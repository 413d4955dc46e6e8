"""What a Kafka API handler is, and what it may use.

A handler takes a decoded request entity (kio's class for that API key and version) and returns
the response entity of the same version; the listener decodes, encodes, frames and orders the
answers. Handlers run on the listener's worker threads and may block (acks=all waits, Fetch long
polls), like the gRPC handlers they share their logic with. A request a handler cannot serve is
answered with Kafka's error code in the response, never an exception: an exception closes the
client's connection (Kafka's answer to a request it cannot parse).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pykraft.broker.admin_forwarding import AdminForwarder
from pykraft.broker.config import BrokerConfig
from pykraft.broker.group.handlers import GroupHandlers
from pykraft.broker.producer_ids import ProducerIdAllocator
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.metadata_log.image import MetadataImage

# The name of the Kafka listener among a broker's registered endpoints (`KAFKA://host:port` in
# `listeners`), so every broker can tell clients where the others' Kafka listeners are.
KAFKA_LISTENER_NAME = "KAFKA"


@dataclass(frozen=True)
class KafkaServices:
    """The broker's parts the handlers call: the same objects the gRPC services use."""

    config: BrokerConfig
    manager: ReplicaManager
    groups: GroupHandlers
    producer_ids: ProducerIdAllocator
    admin: AdminForwarder
    clock_ms: Callable[[], int]  # monotonic: deadlines and the broker's session
    wall_clock_ms: Callable[[], int]  # the log's time (LogAppendTime, timestamp checks)
    may_serve: Callable[[int], bool]  # may_serve(now_ms): this broker is not fenced off


@dataclass(frozen=True)
class RequestContext:
    """One request's envelope: the API version it came in, who sent it."""

    services: KafkaServices
    api_version: int
    client_id: str | None
    client_host: str  # the peer's address, as Kafka reports it for group members


# kio's entities carry no common base type that mypy can use, hence Any.
Handler = Callable[[RequestContext, Any], Any]


@dataclass(frozen=True)
class Api:
    """One Kafka API this listener serves: its key, the versions it answers, its handler."""

    key: int
    version_min: int
    version_max: int
    handle: Handler

    def __post_init__(self) -> None:
        assert 0 <= self.version_min <= self.version_max, self


def kafka_endpoint(image: MetadataImage, broker_id: int) -> tuple[str, int] | None:
    """The (host, port) of `broker_id`'s Kafka listener, as it registered it; None when that
    broker is unknown or has no Kafka listener."""
    registration = image.cluster.brokers.get(broker_id)
    if registration is None:
        return None
    for endpoint in registration.endpoints:
        if endpoint.name == KAFKA_LISTENER_NAME:
            return endpoint.host, endpoint.port
    return None
