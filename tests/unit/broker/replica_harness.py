"""Broker 1's ReplicaManager over real PartitionLogs in a test's tmp_path, with helpers that
call the request handlers the way BrokerService does (the `harness` fixture is in conftest)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pykraft.broker.config import BrokerConfig
from pykraft.broker.controller_channel import monotonic_ms
from pykraft.broker.fetch import handle_fetch
from pykraft.broker.produce import handle_produce
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.proto import broker_pb2
from pykraft.proto.record_batch import build_batch, decode_batch, iter_batches

from .images import ORDERS_ID, advance, cluster_image, topic_records


def wall_clock_ms() -> int:
    """The broker's wall clock, as its server passes it (the log's time)."""
    return time.time_ns() // 1_000_000


def broker_config(*log_dirs: Path, **overrides: Any) -> BrokerConfig:
    """Broker 1's config in unit tests: `log_dirs`, a listener and a controller address that
    nothing opens, and `overrides` (BrokerConfig's fields)."""
    return BrokerConfig(
        node_id=1,
        listener="127.0.0.1:9191",
        log_dirs=log_dirs,
        controller_bootstrap_servers=("127.0.0.1:9091",),
        **overrides,
    )


# orders-0 led by 1 alone; orders-1 led by 1 with 2 in the ISR; orders-2 led by 2.
ASSIGNMENTS = [(1,), (1, 2), (2, 1)]


class Harness:
    """Broker 1's replica manager, hosting `topic` (ORDERS_ID) with `assignments`."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        topic: str = "orders",
        assignments: Sequence[tuple[int, ...]] = ASSIGNMENTS,
        replica_selector_class: str = "",
    ) -> None:
        self.topic = topic
        self.serving = True
        config = broker_config(
            tmp_path / "a",
            tmp_path / "b",
            rack="rack-1",  # as the image registers it
            replica_selector_class=replica_selector_class,
        )
        self.manager = ReplicaManager(config, lambda now_ms: self.serving)
        base = cluster_image()
        self.manager.on_metadata(None, base, now_ms=0)
        delta, self.image = advance(base, topic_records(topic, ORDERS_ID, assignments))
        self.manager.on_metadata(delta, self.image, now_ms=0)

    def change(self, *records: object) -> None:
        delta, image = advance(self.image, list(records))  # type: ignore[arg-type]
        self.manager.on_metadata(delta, image, now_ms=0)
        self.image = image

    def produce(
        self, partition: int, values: list[bytes], *, acks: int = 1, timeout_ms: int = 200
    ) -> broker_pb2.ProducePartitionResult:
        batch = build_batch([(1_000 + i, None, v) for i, v in enumerate(values)])
        request = broker_pb2.ProduceRequest(acks=acks, timeout_ms=timeout_ms)
        topic = request.topics.add(topic=self.topic)
        topic.partitions.add(partition=partition, records=batch)
        answer = handle_produce(self.manager, request, monotonic_ms, wall_clock_ms=wall_clock_ms)
        return answer.topics[0].partitions[0]

    def fetch(
        self,
        offsets: dict[int, int],
        *,
        epoch: int = -1,
        wait_ms: int = 0,
        min_bytes: int = 0,
        bytes_max: int = 1 << 20,
        replica_id: int = -1,
        rack: str | None = None,
    ) -> dict[int, broker_pb2.FetchPartitionResult]:
        """A Fetch of `offsets` by partition; a consumer's carries `rack` unless None (KIP-392:
        it follows preferred read replicas)."""
        request = broker_pb2.FetchRequest(
            replica_id=replica_id,
            max_wait_ms=wait_ms,
            min_bytes=min_bytes,
            max_bytes=bytes_max,
            rack_id=rack,
        )
        topic = request.topics.add(topic="orders")
        for partition, offset in offsets.items():
            topic.partitions.add(
                partition=partition,
                fetch_offset=offset,
                current_leader_epoch=epoch,
                last_fetched_epoch=-1,  # none: proto3's default 0 would name epoch 0
                partition_max_bytes=1 << 20,
            )
        response = handle_fetch(self.manager, request, monotonic_ms)
        return {p.partition: p for p in response.topics[0].partitions}


def record_values(data: bytes) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for pos, _ in iter_batches(data) for r in decode_batch(data, pos)]
