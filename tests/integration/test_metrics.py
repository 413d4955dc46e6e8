"""Issue 16 §2: every node's /metrics, /health and /ready follow the real cluster. Three
controllers and three brokers, each with `--metrics-listen`; the scraped gauges must show the
cluster as it is (one active controller, every partition replicated), then a kill -9'd broker
(UnderReplicatedPartitions and the fenced broker count rise, the ISR shrinks are counted), then
its return (both fall back to 0, the expands are counted, it is ready again), and a consumer
group's committed offset and lag on its coordinator.
"""

from __future__ import annotations

import json
from pathlib import Path

from pykraft.client.admin import AdminClient
from pykraft.client.types import OffsetAndMetadata, TopicPartition

from .cluster import BROKER_IDS, create_topic, make_broker, produce_raw, start_brokers
from .controllers import Quorum, make_quorum
from .metrics_scrape import http_get, total, with_metrics
from .processes import BrokerProcess, wait_for

TOPIC = "watched"
PARTITIONS = 3
URP = "kafka_server_replicamanager_underreplicatedpartitions"
FENCED = "kafka_controller_kafkacontroller_fencedbrokercount"
ACTIVE = "kafka_controller_kafkacontroller_activecontrollercount"


def start_cluster(
    tmp_path: Path,
) -> tuple[Quorum, dict[int, str], dict[int, BrokerProcess], dict[int, str]]:
    quorum = make_quorum(tmp_path, extra_args=("--log-format", "json"))
    controller_metrics = {c.node_id: with_metrics(c) for c in quorum.controllers}
    quorum.start()
    quorum.wait_active()
    brokers = {i: make_broker(tmp_path, quorum, i) for i in BROKER_IDS}
    broker_metrics = {i: with_metrics(b) for i, b in brokers.items()}
    for broker in brokers.values():
        broker.args += ["--override", "offsets.topic.num.partitions=3"]
    start_brokers(quorum, brokers)
    create_topic(quorum, TOPIC, PARTITIONS, "--config", "min.insync.replicas=2")
    return quorum, controller_metrics, brokers, broker_metrics


def test_metrics_follow_a_killed_and_restarted_broker(tmp_path: Path) -> None:
    quorum, controllers, brokers, broker_metrics = start_cluster(tmp_path)
    try:
        check_steady_cluster(controllers, broker_metrics)
        check_traffic_is_counted(brokers, broker_metrics)
        live = {i: a for i, a in broker_metrics.items() if i != 3}
        # Its followers' ISRs shrink under the same leader; its own partitions change leader.
        shrinks = PARTITIONS - total([broker_metrics[3]], "kafka_server_replicamanager_leadercount")
        brokers[3].kill()
        wait_for(
            lambda: total(live.values(), URP) == PARTITIONS,
            timeout_s=30,
            what="every partition under-replicated without broker 3",
        )
        assert total(controllers.values(), FENCED) == 1
        assert total(live.values(), "kafka_server_replicamanager_isrshrinks_total") >= shrinks > 0
        brokers[3].start()
        wait_for(
            lambda: (
                total(broker_metrics.values(), URP) == 0
                and total(controllers.values(), FENCED) == 0
            ),
            timeout_s=60,
            what="broker 3 back in every ISR and unfenced",
        )
        assert total(live.values(), "kafka_server_replicamanager_isrexpands_total") >= PARTITIONS
        wait_for(
            lambda: http_get(broker_metrics[3], "/ready")[0] == 200,
            timeout_s=30,
            what="broker 3 ready",
        )
        check_group_lag(quorum, broker_metrics)
    finally:
        for broker in brokers.values():
            broker.close()
        quorum.close()
    check_json_logs(tmp_path / "controller-1.log")


def check_steady_cluster(controllers: dict[int, str], brokers: dict[int, str]) -> None:
    every = [*controllers.values(), *brokers.values()]
    for address in every:
        assert http_get(address, "/health") == (200, "ok\n")
    wait_for(
        lambda: all(http_get(a, "/ready")[0] == 200 for a in every),
        timeout_s=20,
        what="every node ready",
    )
    assert total(controllers.values(), ACTIVE) == 1
    assert total(controllers.values(), "kafka_controller_kafkacontroller_globalpartitioncount") == (
        PARTITIONS
    )
    assert total(controllers.values(), "kafka_controller_kafkacontroller_activebrokercount") == 3
    assert total(controllers.values(), FENCED) == 0
    assert total(controllers.values(), "kafka_server_raft_metrics_commit_latency_seconds_count") > 0
    assert total(brokers.values(), "kafka_server_replicamanager_partitioncount") == 3 * PARTITIONS
    assert total(brokers.values(), "kafka_server_replicamanager_leadercount") == PARTITIONS
    assert total(brokers.values(), URP) == 0
    assert total(brokers.values(), "kafka_server_replicamanager_underminisrpartitioncount") == 0
    for address in brokers.values():
        assert total([address], "kafka_server_kafkaserver_brokerstate") == 3  # RUNNING
    wait_for(
        lambda: total(controllers.values(), "pykraft_controller_broker_metadata_offset") > 0,
        timeout_s=10,
        what="brokers' metadata offsets reported to the active controller",
    )


def check_traffic_is_counted(brokers: dict[int, BrokerProcess], metrics: dict[int, str]) -> None:
    """Ten records to each partition's leader, acks=all: MessagesIn counts 30 on the leaders,
    BytesIn and the followers' replication reads are counted, Produce's requests timed."""
    sent = 0
    for partition in range(PARTITIONS):
        for broker in brokers.values():
            result = produce_raw(broker, TOPIC, partition, [b"v"] * 10, acks=-1)
            if result.error_code == 0:
                sent += 10
                break
        assert sent == 10 * (partition + 1), f"no broker took partition {partition}"
    everyone = metrics.values()
    assert total(everyone, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 30
    assert total(everyone, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) > 30
    wait_for(
        lambda: total(everyone, "kafka_server_brokertopicmetrics_replicationbytesout_total") > 0,
        timeout_s=10,
        what="followers' fetches counted",
    )
    produce = {"request": "Produce", "listener": "grpc"}
    assert total(everyone, "kafka_network_requestmetrics_requests_total", **produce) >= PARTITIONS
    assert total(everyone, "kafka_network_requestmetrics_totaltime_seconds_count", **produce) >= (
        PARTITIONS
    )


def check_group_lag(quorum: Quorum, brokers: dict[int, str]) -> None:
    """A group that committed offset 4 of partition 0 (10 records): its coordinator reports the
    offset and a lag of 6."""
    with AdminClient(quorum.bootstrap) as admin:
        admin.alter_consumer_group_offsets(
            "watchers", {TopicPartition(TOPIC, 0): OffsetAndMetadata(4)}
        )
    labels = {"consumergroup": "watchers", "topic": TOPIC, "partition": "0"}
    wait_for(
        lambda: (
            total(brokers.values(), "kafka_consumergroup_current_offset", **labels) == 4
            and total(brokers.values(), "kafka_consumergroup_lag", **labels) == 6
        ),
        timeout_s=20,
        what="the group's offset and lag on its coordinator",
    )


def check_json_logs(path: Path) -> None:
    """`--log-format json`: every line the controller logged is one JSON object."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    assert lines
    for line in lines:
        record = json.loads(line)
        assert {"time", "level", "logger", "message"} <= set(record), line
