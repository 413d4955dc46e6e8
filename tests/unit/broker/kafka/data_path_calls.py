"""Calls the data-path handlers (Produce, Fetch, ListOffsets, InitProducerId,
OffsetForLeaderEpoch) the way the listener does, through kio's real codec (`kio_wire`), with
broker 1's services over a test's ReplicaManager."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, cast

from kio.schema.errors import ErrorCode

from pykraft.broker.admin_forwarding import AdminForwarder
from pykraft.broker.controller_channel import monotonic_ms
from pykraft.broker.group.handlers import GroupHandlers
from pykraft.broker.kafka.api import Api, KafkaServices, RequestContext
from pykraft.broker.producer_ids import ProducerIdAllocator
from pykraft.broker.replica_manager import ReplicaManager

from ..replica_harness import broker_config, wall_clock_ms
from ..test_producer_ids import FakeController, allocator
from .kio_wire import through_the_wire

# (a request's current leader epoch, the answer) for orders-0 once it is at leader epoch 1: the
# leader's own epoch, an older one, a newer one (Kafka's checks for Fetch and ListOffsets).
CURRENT_LEADER_EPOCHS: Final = (
    (1, ErrorCode.none),
    (0, ErrorCode.fenced_leader_epoch),
    (2, ErrorCode.unknown_leader_epoch),
)


def services(
    manager: ReplicaManager,
    tmp_path: Path,
    *,
    controller: FakeController | None = None,
    may_serve: bool = True,
) -> KafkaServices:
    """Broker 1's services over `manager`; groups and admin are not used by these APIs."""
    config = broker_config(tmp_path / "unused", request_timeout_ms=2_000)
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


def call(api: Api, services: KafkaServices, version: int, request: Any) -> Any:
    """`kio_wire.through_the_wire` in `context(services, version)`."""
    return through_the_wire(api, context(services, version), request)


def context(services: KafkaServices, version: int) -> RequestContext:
    """A test client's request context at `version`."""
    return RequestContext(services, version, "test-client", "127.0.0.1")
