"""A controller's Prometheus metrics, under Kafka's JMX names as the Prometheus JMX exporter
renders them (`kafka.controller:type=KafkaController,name=ActiveControllerCount` becomes
`kafka_controller_kafkacontroller_activecontrollercount`).

Gauges computed at scrape time by `ControllerCollector` from the controller's committed image,
its role and its last Raft status (read-only: the collector never steps the controller):
  kafka_controller_kafkacontroller_activecontrollercount    1 on the active controller, else 0
  kafka_controller_kafkacontroller_offlinepartitionscount   partitions without a leader
  kafka_controller_kafkacontroller_fencedbrokercount        registered brokers fenced
  kafka_controller_kafkacontroller_activebrokercount        registered brokers unfenced
  kafka_controller_kafkacontroller_globaltopiccount         topics
  kafka_controller_kafkacontroller_globalpartitioncount     partitions
  kafka_controller_kafkacontroller_lastappliedrecordoffset  offset of the image
  kafka_server_raft_metrics_current_leader                  Raft leader's id (-1: none known)
  kafka_server_raft_metrics_current_epoch                   Raft term
  kafka_server_raft_metrics_high_watermark                  Raft commit index
  kafka_server_raft_metrics_log_end_offset                  Raft log end
  pykraft_controller_broker_metadata_offset{broker}         metadata offset a broker reported
  pykraft_controller_broker_metadata_lag_records{broker}    the image's offset minus that
The cluster-wide counts are reported by the active controller only, as in Kafka (a standby
reports 0), so summing them over controllers gives the cluster's figure; the per-broker metadata
offsets too (only the active controller hears heartbeats). Kafka's raft-metrics commit-latency
is the histogram `kafka_server_raft_metrics_commit_latency_seconds` of `raft/pysyncobj_log.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from pykraft.metadata_log import MetadataImage
from pykraft.quorum.controller_core import ControllerCore
from pykraft.quorum.roles import Role

_CONTROLLER: Final = "kafka_controller_kafkacontroller_"
_RAFT: Final = "kafka_server_raft_metrics_"
_NO_LEADER: Final = -1


class ControllerCollector(Collector):
    """The gauges of the module docstring for one controller."""

    def __init__(self, core: ControllerCore) -> None:
        self._core = core

    def collect(self) -> Iterator[GaugeMetricFamily]:
        active = self._core.role.role is Role.ACTIVE
        image = self._core.state.image
        yield _gauge(_CONTROLLER + "activecontrollercount", "1 on the active controller.", active)
        yield from _cluster_gauges(image if active else MetadataImage.EMPTY)
        yield _gauge(
            _CONTROLLER + "lastappliedrecordoffset", "Offset of the committed image.", image.offset
        )
        yield from self._raft_gauges()
        yield from self._broker_gauges(image if active else None)

    def _raft_gauges(self) -> Iterator[GaugeMetricFamily]:
        status = self._core.raft_status
        if status is None:
            return
        leader = _NO_LEADER if status.leader_id is None else status.leader_id
        yield _gauge(_RAFT + "current_leader", "The Raft leader's node id (-1: none).", leader)
        yield _gauge(_RAFT + "current_epoch", "The Raft term.", status.term)
        yield _gauge(_RAFT + "high_watermark", "The Raft commit index.", status.commit_index)
        yield _gauge(_RAFT + "log_end_offset", "The Raft log end.", status.log_end_index)

    def _broker_gauges(self, image: MetadataImage | None) -> Iterator[GaugeMetricFamily]:
        offset = GaugeMetricFamily(
            "pykraft_controller_broker_metadata_offset",
            "Metadata offset each broker last reported (active controller only).",
            labels=["broker"],
        )
        lag = GaugeMetricFamily(
            "pykraft_controller_broker_metadata_lag_records",
            "Metadata records each broker had yet to apply at its last heartbeat.",
            labels=["broker"],
        )
        if image is not None:
            for broker_id, reported in sorted(self._core.broker_metadata_offsets().items()):
                if broker_id in image.cluster.brokers:
                    offset.add_metric([str(broker_id)], reported)
                    lag.add_metric([str(broker_id)], max(image.offset - reported, 0))
        yield offset
        yield lag


def _cluster_gauges(image: MetadataImage) -> Iterator[GaugeMetricFamily]:
    brokers = image.cluster.brokers.values()
    partitions = [p for topic in image.topics.by_id.values() for p in topic.partitions.values()]
    offline = sum(p.leader == _NO_LEADER for p in partitions)
    yield _gauge(_CONTROLLER + "offlinepartitionscount", "Partitions without a leader.", offline)
    fenced = sum(b.fenced for b in brokers)
    yield _gauge(_CONTROLLER + "fencedbrokercount", "Registered brokers fenced.", fenced)
    yield _gauge(_CONTROLLER + "activebrokercount", "Brokers unfenced.", len(brokers) - fenced)
    yield _gauge(_CONTROLLER + "globaltopiccount", "Topics.", len(image.topics.by_id))
    yield _gauge(_CONTROLLER + "globalpartitioncount", "Partitions.", len(partitions))


def _gauge(name: str, documentation: str, value: int) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
