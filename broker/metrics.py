"""A broker's Prometheus metrics, under Kafka's JMX names as the Prometheus JMX exporter renders
them (`kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions` becomes
`kafka_server_replicamanager_underreplicatedpartitions`; a rate such as BytesInPerSec is a
counter, `..._bytesin_total`, that Prometheus turns into a rate).

Counters: the broker's own `Counters` (`broker/counters.py`, which DescribeCounters answers too),
served at scrape time under these names (COUNTER_NAMES):
  kafka_server_brokertopicmetrics_bytesin_total{topic}          BytesInPerSec (leader appends)
  kafka_server_brokertopicmetrics_messagesin_total{topic}       MessagesInPerSec
  kafka_server_brokertopicmetrics_bytesout_total{topic}         BytesOutPerSec (consumers)
  kafka_server_brokertopicmetrics_replicationbytesout_total{topic}  ReplicationBytesOutPerSec
  kafka_server_replicamanager_isrshrinks_total                  IsrShrinksPerSec
  kafka_server_replicamanager_isrexpands_total                  IsrExpandsPerSec
  pykraft_broker_fetch_requests_total{request}                  Fetches by Kafka's request names
                                                                FetchConsumer and FetchFollower
Gauges, computed at scrape time by `BrokerCollector` from the partitions this broker holds:
  kafka_server_replicamanager_partitioncount                    PartitionCount
  kafka_server_replicamanager_leadercount                       LeaderCount
  kafka_server_replicamanager_underreplicatedpartitions         UnderReplicatedPartitions (led
                                                                here, ISR smaller than replicas)
  kafka_server_replicamanager_underminisrpartitioncount         UnderMinIsrPartitionCount
  kafka_server_kafkaserver_brokerstate                          BrokerState (Kafka's numbers)
  kafka_server_broker_metadata_metrics_last_applied_record_offset  broker-metadata-metrics
  kafka_server_delayedoperationpurgatory_purgatorysize{delayedoperation="Fetch"}
                                                                PurgatorySize: fetches waiting
                                                                for records (each holds a thread)
  pykraft_broker_metadata_records_fetched_total                 metadata records fetched since
                                                                start (a counter; after a
                                                                restart, only the tail)
Consumer group lag, which Kafka's brokers do not export, under kafka_exporter's names, computed
by `GroupLagCollector` on the coordinator of each group (the leader of its __consumer_offsets
partition) for each committed partition this broker holds a replica of:
  kafka_consumergroup_current_offset{consumergroup, topic, partition}   the committed offset
  kafka_consumergroup_lag{consumergroup, topic, partition}   high watermark minus that (>= 0)
ISR shrinks and expands are counted by the partition's leader when its metadata shows the change
(its own AlterPartition accepted, or the controller's removal of a fenced replica), once each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from pykraft.broker import counters
from pykraft.broker.lifecycle import BrokerLifecycle

if TYPE_CHECKING:  # the replica manager's partitions count through this module
    from pykraft.broker.group.coordinator import GroupCoordinator
    from pykraft.broker.group.shard import GroupShard
    from pykraft.broker.replica_manager import ReplicaManager

# Series per scrape of each consumer group gauge at most (groups x committed partitions), so a
# broker with very many groups answers a scrape in bounded time; the rest are left out.
GROUP_LAG_SERIES_MAX: Final = 10_000
_GROUP_LABELS: Final = ["consumergroup", "topic", "partition"]

_TOPIC_METRICS: Final = "kafka_server_brokertopicmetrics_"
_REPLICA_MANAGER: Final = "kafka_server_replicamanager_"

# Each counter of `Counters` (every name it counts has an entry): its Prometheus name (without
# `_total`), help and label names.
COUNTER_NAMES: Final[Mapping[str, tuple[str, str, tuple[str, ...]]]] = {
    counters.BYTES_IN_TOTAL: (_TOPIC_METRICS + "bytesin", "Bytes appended as leader.", ("topic",)),
    counters.MESSAGES_IN_TOTAL: (
        _TOPIC_METRICS + "messagesin",
        "Records appended as leader.",
        ("topic",),
    ),
    counters.CONSUMER_BYTES_OUT_TOTAL: (
        _TOPIC_METRICS + "bytesout",
        "Record bytes sent to consumers.",
        ("topic",),
    ),
    counters.REPLICATION_BYTES_OUT_TOTAL: (
        _TOPIC_METRICS + "replicationbytesout",
        "Record bytes sent to followers.",
        ("topic",),
    ),
    counters.ISR_SHRINKS_TOTAL: (_REPLICA_MANAGER + "isrshrinks", "ISR shrinks led here.", ()),
    counters.ISR_EXPANDS_TOTAL: (_REPLICA_MANAGER + "isrexpands", "ISR expands led here.", ()),
    counters.REQUESTS_TOTAL: (
        "pykraft_broker_fetch_requests",
        "Fetches answered, FetchConsumer or FetchFollower.",
        ("request",),
    ),
}


class BrokerCollector(Collector):
    """The counters and gauges of the module docstring, read from the broker's parts at each
    scrape (the counters and the partition list are copied under their locks; each
    registration is immutable)."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        lifecycle: BrokerLifecycle,
        metadata_offset: Callable[[], int],
        metadata_records_fetched: Callable[[], int],
    ) -> None:
        self._replica_manager = replica_manager
        self._lifecycle = lifecycle
        self._metadata_offset = metadata_offset
        self._metadata_records_fetched = metadata_records_fetched

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield from _counter_families(self._replica_manager.counters.snapshot())
        partitions = self._replica_manager.partitions()
        led = [p for p in partitions if p.is_leader]
        registrations = [(p.local.registration, p.min_insync_replicas) for p in led]
        yield _gauge("partitioncount", "Partitions with a replica here.", len(partitions))
        yield _gauge("leadercount", "Partitions led here.", len(led))
        under_replicated = sum(len(r.isr) < len(r.replicas) for r, _ in registrations)
        yield _gauge(
            "underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replica set.",
            under_replicated,
        )
        under_min_isr = sum(len(r.isr) < min_isr for r, min_isr in registrations)
        yield _gauge(
            "underminisrpartitioncount",
            "Partitions led here whose ISR is smaller than min.insync.replicas.",
            under_min_isr,
        )
        yield GaugeMetricFamily(
            "kafka_server_kafkaserver_brokerstate",
            "The broker's state, Kafka's numbers (3 = RUNNING).",
            value=int(self._lifecycle.state),
        )
        yield GaugeMetricFamily(
            "kafka_server_broker_metadata_metrics_last_applied_record_offset",
            "Offset of the last metadata record this broker applied.",
            value=self._metadata_offset(),
        )
        purgatory = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Requests waiting: fetches waiting for records.",
            labels=["delayedoperation"],
        )
        purgatory.add_metric(["Fetch"], self._replica_manager.fetch_waits.held)
        yield purgatory
        yield CounterMetricFamily(
            "pykraft_broker_metadata_records_fetched",
            "Metadata records this broker fetched since it started.",
            value=self._metadata_records_fetched(),
        )


class GroupLagCollector(Collector):
    """The consumer group gauges of the module docstring, from the groups this broker
    coordinates (read under each shard's lock) and its replicas' high watermarks."""

    def __init__(self, groups: GroupCoordinator, replica_manager: ReplicaManager) -> None:
        self._groups = groups
        self._replica_manager = replica_manager

    def collect(self) -> Iterator[GaugeMetricFamily]:
        current = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "Committed offset of each group's partitions (coordinator only).",
            labels=_GROUP_LABELS,
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "High watermark minus the committed offset (coordinator only).",
            labels=_GROUP_LABELS,
        )
        commits = [c for shard in self._groups.each_shard(_committed) for c in shard]
        for group_id, topic, partition_id, offset in commits[:GROUP_LAG_SERIES_MAX]:
            labels = [group_id, topic, str(partition_id)]
            current.add_metric(labels, offset)
            partition = self._replica_manager.partition(topic, partition_id)
            if partition is not None:
                lag.add_metric(labels, max(partition.high_watermark - offset, 0))
        yield current
        yield lag


def _committed(shard: GroupShard) -> list[tuple[str, str, int, int]]:
    """(group, topic, partition, committed offset) of every commit the shard holds."""
    return [
        (group_id, topic, partition_id, value.offset)
        for group_id, group in shard.groups.items()
        for (topic, partition_id), value in group.offsets.items()
    ]


def _counter_families(values: Mapping[counters.CounterKey, int]) -> list[CounterMetricFamily]:
    """Every counter of COUNTER_NAMES, with a sample per label set counted so far."""
    families = {
        key: CounterMetricFamily(name, documentation, labels=labels)
        for key, (name, documentation, labels) in COUNTER_NAMES.items()
    }
    for (key, labels), value in sorted(values.items()):
        by_name = dict(labels)
        families[key].add_metric([by_name[name] for name in COUNTER_NAMES[key][2]], value)
    return list(families.values())


def _gauge(name: str, documentation: str, value: int) -> GaugeMetricFamily:
    return GaugeMetricFamily(_REPLICA_MANAGER + name, documentation, value=value)
