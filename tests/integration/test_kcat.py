"""kcat (the Debian package, with its own librdkafka) against a real 3-broker cluster's Kafka
listeners (issue 14 §4 item 4): `-L` lists the brokers at their Kafka addresses and the topic,
`-P -K:` produces keyed lines with acks=all and idempotence, `-C -e -o beginning` reads every one
back exactly, and `-G` reads them in a consumer group whose offsets it commits.

kcat is installed by `make kafka-tools` (run here when kcat is missing); the tests are skipped,
with make's reason, only where that cannot install it (not root, or no apt-get).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from .cluster import BROKER_IDS
from .kafka_cluster import bootstrap_servers, running_kafka_cluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "kcat-lines"
PARTITIONS = 3
LINES = [f"key-{i}:value-{i}" for i in range(300)]


@pytest.fixture(scope="module")
def kcat() -> str:
    """kcat's path, installed by `make kafka-tools` when missing; skips when it cannot be."""
    said = "make is missing"
    if shutil.which("kcat") is None and shutil.which("make") is not None:
        made = subprocess.run(
            ["make", "-s", "kafka-tools"], cwd=ROOT, capture_output=True, text=True
        )
        said = (made.stdout + made.stderr).strip()
    found = shutil.which("kcat")
    if found is None:
        pytest.skip(f"kcat is missing and `make kafka-tools` could not install it: {said}")
    return found


@pytest.fixture(scope="module")
def kafka_ports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, int]]:
    """A running cluster with `TOPIC`; each broker's Kafka port, by broker id."""
    tmp_path = tmp_path_factory.mktemp("kcat")
    with running_kafka_cluster(tmp_path, topic=TOPIC, partitions=PARTITIONS) as cluster:
        yield cluster.kafka_ports


def _kcat(kcat: str, ports: dict[int, int], *args: str, stdin: str = "") -> str:
    """Runs kcat against the cluster; its standard output (it must exit 0)."""
    ran = subprocess.run(
        [kcat, "-b", bootstrap_servers(ports), *args],
        input=stdin, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


def test_kcat_lists_the_brokers_and_the_topic(kcat: str, kafka_ports: dict[int, int]) -> None:
    listed = json.loads(_kcat(kcat, kafka_ports, "-L", "-J"))
    brokers = {b["id"]: b["name"] for b in listed["brokers"]}
    assert brokers == {i: f"127.0.0.1:{port}" for i, port in kafka_ports.items()}
    (topic,) = [t for t in listed["topics"] if t["topic"] == TOPIC]
    assert sorted(p["partition"] for p in topic["partitions"]) == list(range(PARTITIONS))
    for partition in topic["partitions"]:
        assert sorted(r["id"] for r in partition["replicas"]) == list(BROKER_IDS)


@pytest.fixture(scope="module")
def produced(kcat: str, kafka_ports: dict[int, int]) -> dict[int, int]:
    """`LINES` produced into `TOPIC` by `kcat -P -K:` with acks=all and idempotence; the ports."""
    produce = ("-P", "-t", TOPIC, "-K:", "-X", "acks=all", "-X", "enable.idempotence=true")
    _kcat(kcat, kafka_ports, *produce, stdin="\n".join(LINES) + "\n")
    return kafka_ports


KEY_VALUE = ("-e", "-q", "-f", "%k:%s\\n")  # exit at the end; print key:value lines only


def test_kcat_reads_back_every_keyed_line(kcat: str, produced: dict[int, int]) -> None:
    read = _kcat(kcat, produced, "-C", "-t", TOPIC, "-o", "beginning", *KEY_VALUE)
    assert sorted(read.splitlines()) == sorted(LINES)


def _committed_total(ports: dict[int, int], group: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap_servers(ports), "group.id": group})
    try:
        asked = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        return sum(tp.offset for tp in consumer.committed(asked, timeout=10))
    finally:
        consumer.close()


def test_kcat_consumes_in_a_group_and_commits(kcat: str, produced: dict[int, int]) -> None:
    group = ("-G", "kcat-group", "-X", "auto.offset.reset=earliest", TOPIC)
    read = _kcat(kcat, produced, *KEY_VALUE, *group)
    assert sorted(read.splitlines()) == sorted(LINES)
    assert _committed_total(produced, "kcat-group") == len(LINES)
