"""A 3-broker cluster whose brokers also listen for the Kafka protocol (issue 14 §1, §4): each
broker gets a KAFKA:// listener beside its gRPC one, so unchanged Kafka clients can bootstrap
from `KafkaCluster.bootstrap`; tests kill or stop brokers through `brokers`. Classic groups
wait INITIAL_REBALANCE_DELAY_MS (Kafka's group.initial.rebalance.delay.ms, 3 s as shipped)
before their first rebalance, so that consumers a test starts together still land in one
generation without each group costing 3 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.ports import free_port

from .cluster import (
    BROKER_IDS,
    create_topic,
    make_broker,
    start_brokers,
    wait_until_brokers_know,
)
from .controllers import Quorum, running_quorum
from .processes import BrokerProcess

INITIAL_REBALANCE_DELAY_MS = 300


def add_kafka_listener(broker: BrokerProcess) -> int:
    """Gives `broker` (not started) a KAFKA:// listener beside its gRPC one; its port."""
    port = free_port()
    at = broker.args.index("--listeners") + 1
    broker.args[at] = f"{broker.args[at]},KAFKA://127.0.0.1:{port}"
    return port


@dataclass
class KafkaCluster:
    quorum: Quorum
    brokers: dict[int, BrokerProcess]
    kafka_ports: dict[int, int]  # by broker id

    @property
    def bootstrap(self) -> str:
        """Every broker's Kafka address, comma-separated (bootstrap.servers)."""
        return bootstrap_servers(self.kafka_ports)


def bootstrap_servers(ports: dict[int, int]) -> str:
    """Kafka's `bootstrap.servers` for the brokers listening on `ports`."""
    return ",".join(f"127.0.0.1:{port}" for port in ports.values())


@contextmanager
def running_kafka_cluster(
    tmp_path: Path,
    *,
    topic: str | None = None,
    partitions: int = 1,
    broker_args: tuple[str, ...] = (),
) -> Iterator[KafkaCluster]:
    """Three controllers and three unfenced brokers with Kafka listeners (and `broker_args`),
    and `topic` when given (`partitions` partitions, replication factor 3, every replica in its
    ISR); brokers killed on exit."""
    with running_quorum(tmp_path) as quorum:
        brokers = {i: make_broker(tmp_path, quorum, i) for i in BROKER_IDS}
        try:
            for broker in brokers.values():
                broker.args += list(broker_args)
            ports = {i: add_kafka_listener(broker) for i, broker in brokers.items()}
            for broker in brokers.values():
                broker.args += [
                    "--override", f"group.initial.rebalance.delay.ms={INITIAL_REBALANCE_DELAY_MS}"
                ]  # fmt: skip
            start_brokers(quorum, brokers)
            if topic is not None:
                create_topic(quorum, topic, partitions)
                wait_until_brokers_know(brokers, topic, partitions)
            yield KafkaCluster(quorum, brokers, ports)
        finally:
            for broker in brokers.values():
                broker.close()
