"""The cluster the consumer-group integration tests run against (issue 6 §4): three controllers,
three brokers, a topic of 6 partitions (replication factor 3), `__consumer_offsets` created on
first use with Kafka's 50 partitions. The group coordinator runs with a 4 s session timeout and
300 ms heartbeats, so the timeouts the tests wait for stay short; everything else is as shipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pykraft.client import Producer

from . import cluster
from .controllers import Quorum
from .processes import BrokerProcess

TOPIC = "events"
PARTITIONS = 6
SESSION_TIMEOUT_MS = 4000
GROUP_BROKER_ARGS = (
    "--override", f"group.consumer.session.timeout.ms={SESSION_TIMEOUT_MS}",
    "--override", "group.consumer.heartbeat.interval.ms=300",
    "--replica-lag-time-max-ms", "3000",
)  # fmt: skip
STABLE_TIMEOUT_S = 30


@contextmanager
def group_cluster(tmp_path: Path) -> Iterator[tuple[Quorum, dict[int, BrokerProcess], str]]:
    with cluster.running_cluster(
        tmp_path, topic=TOPIC, partitions=PARTITIONS, broker_args=GROUP_BROKER_ARGS
    ) as (quorum, brokers):
        yield quorum, brokers, ",".join(b.address for b in brokers.values())


def produce(bootstrap: str, count: int, *, start: int = 0) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for i in range(start, start + count):
            producer.send(TOPIC, b"r%06d" % i, key=b"k%d" % i)
        producer.flush(timeout=60)
