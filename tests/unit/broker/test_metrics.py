"""The broker's metrics over broker 1's real replica manager (replica_harness): the gauges follow
the partitions it holds and leads, the ISR and traffic counters move once per change, append or
answered Fetch, and DescribeCounters and /metrics show the same counts."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from pykraft.broker.counters import describe
from pykraft.broker.lifecycle import BrokerLifecycle, BrokerState
from pykraft.broker.metrics import BrokerCollector
from pykraft.metadata_log.records import PartitionChangeRecord

from .images import ORDERS_ID
from .replica_harness import Harness


def scrape(harness: Harness, lifecycle: BrokerLifecycle | None = None) -> dict[str, float]:
    """Every sample by name, labels appended as `name{value}` for a labelled one."""
    registry = CollectorRegistry()
    registry.register(
        BrokerCollector(harness.manager, lifecycle or BrokerLifecycle(), lambda: 41, lambda: 7)
    )
    return {
        sample.name + "".join(f"{{{v}}}" for v in sample.labels.values()): sample.value
        for family in registry.collect()
        for sample in family.samples
    }


def test_gauges_follow_the_partitions_held_and_led(harness: Harness) -> None:
    lifecycle = BrokerLifecycle()
    found = scrape(harness, lifecycle)
    # orders-0 (replicas 1), orders-1 (1, 2) led here; orders-2 (2, 1) followed.
    assert {k.rpartition("_replicamanager_")[2]: v for k, v in found.items() if "count" in k} == {
        "partitioncount": 3,
        "leadercount": 2,
        "underminisrpartitioncount": 0,
    }
    assert found["kafka_server_replicamanager_underreplicatedpartitions"] == 0
    assert found["kafka_server_kafkaserver_brokerstate"] == 0
    assert found["kafka_server_broker_metadata_metrics_last_applied_record_offset"] == 41
    assert found["pykraft_broker_metadata_records_fetched_total"] == 7
    assert "kafka_server_replicamanager_isrshrinks_total" not in found  # none yet
    harness.change(PartitionChangeRecord(ORDERS_ID, 1, isr=(1,)))
    harness.change(PartitionChangeRecord(ORDERS_ID, 2, isr=(2,)))  # not led here: not counted
    lifecycle.transition(BrokerState.STARTING)
    found = scrape(harness, lifecycle)
    assert found["kafka_server_replicamanager_underreplicatedpartitions"] == 1
    assert found["kafka_server_kafkaserver_brokerstate"] == BrokerState.STARTING
    assert found["kafka_server_replicamanager_isrshrinks_total"] == 1
    harness.change(PartitionChangeRecord(ORDERS_ID, 1, isr=(1, 2)))
    found = scrape(harness)
    assert found["kafka_server_replicamanager_isrexpands_total"] == 1
    assert found["kafka_server_replicamanager_underreplicatedpartitions"] == 0


def test_traffic_is_counted_per_topic_once_per_answer(harness: Harness) -> None:
    assert harness.produce(0, [b"a", b"b", b"c"]).error_code == 0
    found = scrape(harness)
    assert found["kafka_server_brokertopicmetrics_messagesin_total{orders}"] == 3
    appended = found["kafka_server_brokertopicmetrics_bytesin_total{orders}"]
    assert appended > 3
    assert len(harness.fetch({0: 0})[0].records) == appended  # a consumer's read
    assert len(harness.fetch({1: 0}, replica_id=2)[1].records) == 0  # a follower's, empty
    found = scrape(harness)
    assert found["kafka_server_brokertopicmetrics_bytesout_total{orders}"] == appended
    assert found["kafka_server_brokertopicmetrics_replicationbytesout_total{orders}"] == 0
    assert found["pykraft_broker_fetch_requests_total{FetchConsumer}"] == 1
    assert found["pykraft_broker_fetch_requests_total{FetchFollower}"] == 1
    described = {
        (c.name, tuple(c.labels.values())): c.value
        for c in describe(harness.manager.counters).counters
    }
    assert described[("bytes_in_total", ("orders",))] == appended
    assert described[("consumer_bytes_out_total", ("orders",))] == appended
