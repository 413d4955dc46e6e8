"""A broker with more parked fetches than request threads still answers everything else.

A Fetch that finds nothing new waits (up to its max_wait_ms) on one of the broker's request
threads. With one pool of `grpc.workers.max` (64) threads for everything, 64 idle consumers
long-polling took all of them and a Produce waited until a fetch's wait ran out. Kafka parks such
fetches in its purgatory without a thread; here they get threads of their own, up to
`fetch.waits.max`, beyond which a fetch answers at once.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pykraft.proto import broker_pb2, common_pb2

from .cluster import (
    BROKER_IDS,
    create_topic,
    make_broker,
    produce_raw,
    registrations,
    start_brokers,
    wait_until_brokers_know,
)
from .controllers import running_quorum
from .metrics_scrape import total, with_metrics
from .processes import BrokerProcess, wait_for

pytestmark = pytest.mark.integration

TOPIC = "parked"
PARKED_FETCHES = 80  # more than the broker's default grpc.workers.max (64)
PARK_WAIT_MS = 20_000  # far longer than the test takes once the Produce is answered
PARKED = "kafka_server_delayedoperationpurgatory_purgatorysize"


def _park(broker: BrokerProcess, partition: int, answered: list[int]) -> None:
    """One consumer's Fetch of `partition` at its end, answered when records arrive."""
    item = broker_pb2.FetchPartition(
        partition=partition,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    request = broker_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=PARK_WAIT_MS,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[broker_pb2.FetchTopic(topic=TOPIC, partitions=[item])],
    )
    response = broker.stub().Fetch(request, timeout=PARK_WAIT_MS / 1000 + 10)
    answered.append(response.topics[0].partitions[0].error_code)


def _two_partitions_of_one_leader(leaders: dict[int, int]) -> tuple[int, int, int]:
    """(leader, partition, other partition); four partitions on three brokers share one."""
    by_leader: dict[int, list[int]] = {}
    for partition, leader in sorted(leaders.items()):
        by_leader.setdefault(leader, []).append(partition)
    leader, (first, second, *_) = next((b, p) for b, p in by_leader.items() if len(p) > 1)
    return leader, first, second


def test_a_produce_is_answered_while_many_fetches_are_parked(tmp_path: Path) -> None:
    with running_quorum(tmp_path) as quorum:
        brokers = {i: make_broker(tmp_path, quorum, i) for i in BROKER_IDS}
        metrics = {i: with_metrics(broker) for i, broker in brokers.items()}
        try:
            start_brokers(quorum, brokers)
            create_topic(quorum, TOPIC, 4)
            wait_until_brokers_know(brokers, TOPIC, 4)
            leaders = {p: r.leader for p, r in registrations(quorum, TOPIC).items()}
            leader, parked_partition, produced_partition = _two_partitions_of_one_leader(leaders)
            broker = brokers[leader]
            answered: list[int] = []
            parked = [
                threading.Thread(
                    target=_park, args=(broker, parked_partition, answered), daemon=True
                )
                for _ in range(PARKED_FETCHES)
            ]
            for thread in parked:
                thread.start()
            # At least: the followers' fetches of this leader's partitions park there too.
            wait_for(
                lambda: (
                    total([metrics[leader]], PARKED, delayedoperation="Fetch") >= PARKED_FETCHES
                ),
                timeout_s=20,
                what=f"{PARKED_FETCHES} fetches parked on broker {leader}",
            )

            # produce_raw's own deadline (10 s) is half the parked fetches' wait.
            result = produce_raw(broker, TOPIC, produced_partition, [b"through"], acks=1)
            assert result.error_code == common_pb2.NONE

            # A record on the parked partition answers every parked fetch.
            produce_raw(broker, TOPIC, parked_partition, [b"wake"], acks=1)
            for thread in parked:
                thread.join(timeout=PARK_WAIT_MS / 1000)
            assert answered == [common_pb2.NONE] * PARKED_FETCHES
        finally:
            for broker in brokers.values():
                broker.close()
