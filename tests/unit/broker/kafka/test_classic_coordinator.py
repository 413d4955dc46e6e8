"""Classic groups on the real GroupCoordinator over a real `__consumer_offsets` log (broker 1's
ReplicaManager in tmp_path), through Kafka's protocol: what a rebalance settles is written to
the log, and a new coordinator of the partition (the broker restarted, or leadership moved)
loads it, so a member of a Stable group heartbeats on in its generation and syncs for its
assignment, without a rebalance; their sessions start when the load ends. The coordinator
writes at the wall clock: a committed offset's record carries the log's time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from pykraft.broker.group.config import OFFSETS_TOPIC, GroupConfig
from pykraft.broker.group.coordinator import GroupCoordinator, partition_for
from pykraft.broker.kafka.api import KafkaServices
from pykraft.metadata_log.records import ConfigRecord, ConfigResourceType, PartitionChangeRecord
from pykraft.proto.record_batch import decode_batch, iter_batches
from tests.unit.broker.images import EVENTS_ID, ORDERS_ID, topic_records
from tests.unit.broker.kafka.classic_calls import G, beat, commit, describe, join, join_new, sync
from tests.unit.broker.kafka.group_harness import WALL_CLOCK_MS, kafka_services
from tests.unit.broker.replica_harness import Harness

WAIT_S = 10.0
SESSION_MS = 10_000  # what classic_calls' members join with
OFFSETS_PARTITION = partition_for(G, 3)


@pytest.fixture
def offsets_log(tmp_path: Path) -> Iterator[Harness]:
    """Broker 1 leads `__consumer_offsets` (3 partitions; the group's alone in its ISR, so
    writes are replicated at once) and hosts "orders" (1 partition)."""
    harness = Harness(tmp_path, topic=OFFSETS_TOPIC)
    harness.change(
        PartitionChangeRecord(ORDERS_ID, OFFSETS_PARTITION, isr=(1,), leader=1),
        *topic_records("orders", EVENTS_ID, [(1,)]),
    )
    yield harness
    harness.manager.close()


@dataclass
class Clock:
    now_ms: int = 1_000

    def wall_ms(self) -> int:
        return WALL_CLOCK_MS + self.now_ms


class Coordinator:
    """A GroupCoordinator of broker 1 with its Kafka group handlers, once it has loaded the
    group's partition."""

    def __init__(self, harness: Harness, clock: Clock) -> None:
        self.coordinator = GroupCoordinator(
            harness.manager,
            GroupConfig(initial_rebalance_delay_ms=0),
            clock_ms=lambda: clock.now_ms,
            wall_clock_ms=clock.wall_ms,
        )
        self.services: KafkaServices = kafka_services(
            self.coordinator,
            harness.manager,
            clock_ms=lambda: clock.now_ms,
            wall_clock_ms=clock.wall_ms,
            may_serve=lambda now_ms: True,
        )
        self.coordinator.start()
        self.coordinator.on_metadata()
        loading = (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator)
        _wait_for(lambda: describe(self.services).error_code not in loading, "the load")

    def __enter__(self) -> Coordinator:
        return self

    def __exit__(self, *_: object) -> None:
        self.coordinator.close()


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {WAIT_S} s"
        time.sleep(0.01)


def _stable_pair(services: KafkaServices) -> tuple[str, str]:
    """Two members, Stable in generation 2: the first leads and gave itself "A", the
    other "B"."""
    a = join_new(services, 5).member_id
    sync(services, 3, a, 1, {a: b"A"})
    b_answer: list[Any] = []
    b_thread = threading.Thread(target=lambda: b_answer.append(join_new(services, 5)))
    b_thread.start()
    _wait_for(lambda: beat(services, 3, a, 1) == ErrorCode.rebalance_in_progress, "rebalance")
    assert join(services, 5, a).generation_id == 2
    b_thread.join(WAIT_S)
    b = b_answer[0].member_id
    b_synced: list[Any] = []
    b_sync = threading.Thread(target=lambda: b_synced.append(sync(services, 3, b, 2)))
    b_sync.start()
    assert sync(services, 3, a, 2, {a: b"A", b: b"B"}).assignment == b"A"
    b_sync.join(WAIT_S)
    assert b_synced[0].assignment == b"B"
    return a, b


def test_a_new_coordinator_loads_a_stable_group_whose_members_heartbeat_on(
    offsets_log: Harness,
) -> None:
    clock = Clock()
    with Coordinator(offsets_log, clock) as first:
        a, b = _stable_pair(first.services)
    clock.now_ms += 6 * SESSION_MS  # the sessions start again from the load
    with Coordinator(offsets_log, clock) as second:
        services = second.services
        assert beat(services, 3, a, 2) == ErrorCode.none
        assert beat(services, 3, b, 2) == ErrorCode.none
        assert sync(services, 3, b, 2).assignment == b"B"
        described = describe(services)
        assert (described.group_state, described.protocol_data) == ("Stable", "range")
        assert {(m.member_id, m.member_assignment) for m in described.members} == {
            (a, b"A"),
            (b, b"B"),
        }
        assert join(services, 5, b, protocols=("range",)).generation_id == 2, "no rebalance"
        clock.now_ms += SESSION_MS - 1
        assert beat(services, 3, a, 2) == ErrorCode.none
        clock.now_ms += 1  # b's session, started by the load, ran out
        assert beat(services, 3, a, 2) == ErrorCode.rebalance_in_progress
        assert beat(services, 3, b, 2) == ErrorCode.unknown_member_id


def test_a_loaded_empty_group_keeps_its_generation_and_commits_stay_checked(
    offsets_log: Harness,
) -> None:
    clock = Clock()
    with Coordinator(offsets_log, clock) as first:
        a = join_new(first.services, 5).member_id
        sync(first.services, 3, a, 1, {a: b"A"})
        assert commit(first.services, a, 1, offset=3) == ErrorCode.none
        clock.now_ms += SESSION_MS  # a's session runs out: the group empties (generation 2)
        _wait_for(lambda: describe(first.services).group_state == "Empty", "the expiry")
    with Coordinator(offsets_log, clock) as second:
        described = describe(second.services)
        assert (described.group_state, described.protocol_type) == ("Empty", "consumer")
        assert commit(second.services, a, 1, offset=4) == ErrorCode.unknown_member_id
        assert commit(second.services, "", -1, offset=4) == ErrorCode.none
        rejoined = join_new(second.services, 5)
        assert rejoined.generation_id == 3


def test_committed_offsets_are_written_at_the_wall_clock(offsets_log: Harness) -> None:
    """With LogAppendTime the log stamps each batch with the time the coordinator appends
    at: the wall clock, as for produce, never the monotonic clock of its timers."""
    offsets_log.change(
        ConfigRecord(
            ConfigResourceType.TOPIC, OFFSETS_TOPIC, "message.timestamp.type", "LogAppendTime"
        )
    )
    clock = Clock()
    with Coordinator(offsets_log, clock) as coordinator:
        assert commit(coordinator.services, "", -1, offset=7) == ErrorCode.none
    partition = offsets_log.manager.partition(OFFSETS_TOPIC, OFFSETS_PARTITION)
    assert partition is not None
    read = partition.read(0, bytes_max=1 << 20, upper_offset=partition.log_end_offset)
    records = [r for pos, _ in iter_batches(read.data) for r in decode_batch(read.data, pos)]
    assert records, "the commit was written"
    assert {r.timestamp for r in records} == {clock.wall_ms()}
