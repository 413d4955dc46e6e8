"""The real `GroupHandlers` on one in-memory `GroupShard` (no log, no replication), and kio's
codec on both sides of a handler, for the tests of the Kafka group APIs."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast
from uuid import UUID

from kio.index import load_request_schema

from pykraft.broker.group.config import OFFSETS_TOPIC, GroupConfig
from pykraft.broker.group.handlers import GroupHandlers
from pykraft.broker.group.shard import GroupShard
from pykraft.broker.group.shard_state import Decision
from pykraft.broker.kafka.api import (
    KAFKA_LISTENER_NAME,
    Api,
    KafkaServices,
    RequestContext,
)
from pykraft.broker.kafka.entities import build, nested_type
from pykraft.metadata_log import MetadataImage, replay_all
from pykraft.metadata_log.records import (
    Endpoint,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
)
from pykraft.proto import group_pb2
from tests.unit.broker.kafka.kio_wire import through_the_wire

T = TypeVar("T")
TOPICS = {"orders": 3, OFFSETS_TOPIC: 1}
WALL_CLOCK_MS = 1_700_000_000_000  # the wall clock when the monotonic one reads 0


def group_image(*, kafka_listener: bool = True) -> MetadataImage:
    """Broker 1, with a gRPC and (optionally) a Kafka endpoint, leading `__consumer_offsets`."""
    endpoints = [Endpoint("GRPC", "127.0.0.1", 9191)]
    if kafka_listener:
        endpoints.append(Endpoint(KAFKA_LISTENER_NAME, "127.0.0.1", 9092))
    records: list[Record] = [
        RegisterBrokerRecord(
            1, UUID(int=101), broker_epoch=1, endpoints=tuple(endpoints), fenced=False
        ),
        TopicRecord(OFFSETS_TOPIC, UUID(int=7)),
        PartitionRecord(UUID(int=7), 0, (1,), (1,), 1),
        TopicRecord("orders", UUID(int=8)),
    ]
    records += [PartitionRecord(UUID(int=8), p, (1,), (1,), 1) for p in range(3)]
    return replay_all(MetadataImage.EMPTY, records).apply(offset=len(records), epoch=1)


class FakeCoordinator:
    """One shard that always leads: decisions apply at once (their records replayed).
    `before_next_run`, when set, runs once just before the next decision takes the shard, as
    a request that won the shard's lock first would."""

    def __init__(self, shard: GroupShard) -> None:
        self.shard = shard
        self.config = shard.config
        self.before_next_run: Callable[[], None] | None = None
        self._lock = threading.RLock()  # the shard's lock; re-entered by `before_next_run`

    def topics(self) -> dict[str, int]:
        return TOPICS

    def run(self, group_id: str, decide: Callable[[GroupShard], Decision[Any]]) -> Any:
        with self._lock:
            first, self.before_next_run = self.before_next_run, None
            if first is not None:
                first()
            return decide(self.shard).response

    def each_shard(self, read: Callable[[GroupShard], T]) -> list[T]:
        with self._lock:
            return [read(self.shard)]


@dataclass
class FakeManager:
    image: MetadataImage
    changed: threading.Condition = field(default_factory=threading.Condition)


@dataclass
class GroupWorld:
    """The objects a Kafka group handler reaches, with a clock the test moves. Classic groups
    rebalance without group.initial.rebalance.delay.ms unless `config` says otherwise."""

    config: GroupConfig = field(default_factory=lambda: GroupConfig(initial_rebalance_delay_ms=0))
    manager: FakeManager = field(default_factory=lambda: FakeManager(group_image()))
    now_ms: int = 1_000
    serving: bool = True  # False: the broker is fenced, its coordinator answers nothing

    def __post_init__(self) -> None:
        self.shard = GroupShard(self.config)
        self.coordinator = FakeCoordinator(self.shard)

    def services(self) -> KafkaServices:
        return kafka_services(
            self.coordinator,
            self.manager,
            clock_ms=lambda: self.now_ms,
            wall_clock_ms=lambda: WALL_CLOCK_MS + self.now_ms,
            may_serve=lambda now_ms: self.serving,
        )

    def join_consumer_member(self, group_id: str, member_id: str) -> None:
        """`member_id` joins `group_id` as a KIP-848 consumer (epoch 0, subscribed to
        "orders"): afterwards the group is a consumer group with that one member."""
        self.shard.membership.heartbeat(
            group_pb2.ConsumerGroupHeartbeatRequest(
                group_id=group_id,
                member_id=member_id,
                member_epoch=0,
                rebalance_timeout_ms=1000,
                subscribed_topic_names=["orders"],
            ),
            client_host="/127.0.0.1",
            topics={"orders": 3},
            now_ms=self.now_ms,
            wall_ms=self.now_ms,
        )


def kafka_services(
    coordinator: object,
    manager: object,
    *,
    clock_ms: Callable[[], int],
    wall_clock_ms: Callable[[], int],
    may_serve: Callable[[int], bool],
) -> KafkaServices:
    """What the Kafka group handlers reach: real GroupHandlers on `coordinator` (a
    GroupCoordinator or a FakeCoordinator) and `manager`; nothing else is used."""
    handlers = GroupHandlers(
        cast(Any, coordinator),
        cast(Any, manager),
        cast(Any, None),
        may_serve=may_serve,
        clock_ms=clock_ms,
        wall_clock_ms=wall_clock_ms,
        request_timeout_ms=1_000,
    )
    return KafkaServices(
        config=cast(Any, None),
        manager=cast(Any, manager),
        groups=handlers,
        producer_ids=cast(Any, None),
        admin=cast(Any, None),
        clock_ms=clock_ms,
        wall_clock_ms=wall_clock_ms,
        may_serve=lambda now_ms: True,
    )


def part(api: Api, version: int, entity_name: str, /, **fields: Any) -> Any:
    """The nested request entity `entity_name` of `api` at `version`, from those of `fields` that
    version has."""
    return build(nested_type(load_request_schema(api.key, version), entity_name), **fields)


def call(api: Api, version: int, services: KafkaServices, /, **fields: Any) -> Any:
    """The handler's answer to a request of `api` at `version` (from those of `fields` the
    version has), both through kio's codec (`kio_wire.through_the_wire`)."""
    ctx = RequestContext(services, version, "test-client", "/127.0.0.1")
    return through_the_wire(api, ctx, build(load_request_schema(api.key, version), **fields))
