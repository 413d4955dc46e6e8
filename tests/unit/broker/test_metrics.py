"""The broker's metrics over broker 1's real replica manager (replica_harness): the gauges follow
the partitions it holds and leads, the ISR and traffic counters move once per change, append or
answered Fetch."""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry

from pykraft.broker.lifecycle import BrokerLifecycle, BrokerState
from pykraft.broker.metrics import BrokerCollector
from pykraft.metadata_log.records import PartitionChangeRecord

from .images import ORDERS_ID
from .replica_harness import Harness


def gauges(harness: Harness, lifecycle: BrokerLifecycle) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(BrokerCollector(harness.manager, lifecycle, lambda: 41))
    return {
        sample.name.rpartition("_replicamanager_")[2]: sample.value
        for family in registry.collect()
        for sample in family.samples
    }


def counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_gauges_follow_the_partitions_held_and_led(harness: Harness) -> None:
    lifecycle = BrokerLifecycle()
    # orders-0 (replicas 1), orders-1 (1, 2) led here; orders-2 (2, 1) followed.
    assert gauges(harness, lifecycle) == {
        "partitioncount": 3,
        "leadercount": 2,
        "underreplicatedpartitions": 0,
        "underminisrpartitioncount": 0,
        "kafka_server_kafkaserver_brokerstate": 0,
        "kafka_server_broker_metadata_metrics_last_applied_record_offset": 41,
    }
    shrinks = counter("kafka_server_replicamanager_isrshrinks_total")
    expands = counter("kafka_server_replicamanager_isrexpands_total")
    harness.change(PartitionChangeRecord(ORDERS_ID, 1, isr=(1,)))
    harness.change(PartitionChangeRecord(ORDERS_ID, 2, isr=(2,)))  # not led here: not counted
    lifecycle.transition(BrokerState.STARTING)
    found = gauges(harness, lifecycle)
    assert (found["underreplicatedpartitions"], found["underminisrpartitioncount"]) == (1, 0)
    assert found["kafka_server_kafkaserver_brokerstate"] == BrokerState.STARTING
    assert counter("kafka_server_replicamanager_isrshrinks_total") == shrinks + 1
    harness.change(PartitionChangeRecord(ORDERS_ID, 1, isr=(1, 2)))
    assert counter("kafka_server_replicamanager_isrexpands_total") == expands + 1
    assert gauges(harness, lifecycle)["underreplicatedpartitions"] == 0


def test_traffic_is_counted_per_topic_once_per_answer(harness: Harness) -> None:
    topic = {"topic": "orders"}
    messages = counter("kafka_server_brokertopicmetrics_messagesin_total", **topic)
    bytes_in = counter("kafka_server_brokertopicmetrics_bytesin_total", **topic)
    out = counter("kafka_server_brokertopicmetrics_bytesout_total", **topic)
    replicated = counter("kafka_server_brokertopicmetrics_replicationbytesout_total", **topic)
    assert harness.produce(0, [b"a", b"b", b"c"]).error_code == 0
    assert counter("kafka_server_brokertopicmetrics_messagesin_total", **topic) == messages + 3
    appended = counter("kafka_server_brokertopicmetrics_bytesin_total", **topic) - bytes_in
    assert appended > 3
    assert len(harness.fetch({0: 0})[0].records) == appended  # a consumer's read
    assert counter("kafka_server_brokertopicmetrics_bytesout_total", **topic) == out + appended
    harness.fetch({1: 0}, replica_id=2)  # a follower's read of an empty partition
    assert (
        counter("kafka_server_brokertopicmetrics_replicationbytesout_total", **topic) == replicated
    )
