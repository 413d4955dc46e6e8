"""A 3-broker cluster whose brokers also listen for Kafka's protocol (issue 14 §1), for tests that
drive it with clients no one here wrote: each broker gets a KAFKA:// listener beside its gRPC one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.ports import free_port

from .cluster import BROKER_IDS, create_topic, make_broker, start_brokers
from .controllers import running_quorum
from .processes import BrokerProcess


def add_kafka_listener(broker: BrokerProcess) -> int:
    """Gives `broker` (not started) a KAFKA:// listener beside its gRPC one; its port."""
    port = free_port()
    at = broker.args.index("--listeners") + 1
    broker.args[at] = f"{broker.args[at]},KAFKA://127.0.0.1:{port}"
    return port


@contextmanager
def running_kafka_cluster(
    tmp_path: Path, *, topic: str | None = None, partitions: int = 1
) -> Iterator[dict[int, int]]:
    """Three controllers and three brokers with Kafka listeners, and `topic` (when given:
    `partitions` partitions, replication factor 3, every replica in its ISR); each broker's Kafka
    port, by broker id. The brokers are closed on exit."""
    with running_quorum(tmp_path) as quorum:
        brokers = {i: make_broker(tmp_path, quorum, i) for i in BROKER_IDS}
        try:
            ports = {i: add_kafka_listener(broker) for i, broker in brokers.items()}
            start_brokers(quorum, brokers)
            if topic is not None:
                create_topic(quorum, topic, partitions)
            yield ports
        finally:
            for broker in brokers.values():
                broker.close()


def bootstrap_servers(ports: dict[int, int]) -> str:
    """Kafka's `bootstrap.servers` for the brokers listening on `ports`."""
    return ",".join(f"127.0.0.1:{port}" for port in ports.values())
