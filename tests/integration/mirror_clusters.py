"""Two real clusters and a real `pykraft mirror` process between them, for the mirror's tests
and benchmark: each cluster one controller and one broker (replication is tested elsewhere; the
mirror's promises are about its own crashes), with its own ports and directories; the mirror
a subprocess that can be killed with SIGKILL and started again with the same configuration.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pykraft.client import AdminClient, Consumer, TopicPartition, UnknownTopicOrPartitionError
from pykraft.client.admin import OffsetSpec

from .cluster import make_broker
from .controllers import PYKRAFT, Quorum, running_quorum
from .processes import BrokerProcess, wait_for

# One broker: the group coordinator's topic gets replication factor 1 and few partitions, and
# group sessions are short so a member that left is gone quickly.
SMALL_CLUSTER_BROKER_ARGS = (
    "--override", "offsets.topic.replication.factor=1",
    "--override", "offsets.topic.num.partitions=5",
    "--override", "group.consumer.session.timeout.ms=4000",
    "--override", "group.consumer.heartbeat.interval.ms=300",
)  # fmt: skip
# What every test mirror is configured with: replication factor 1 (one broker per cluster),
# and intervals of a second so the tests wait seconds, not MM2's minutes.
SMALL_CLUSTER_MIRROR_PROPERTIES = {
    "replication.factor": "1",
    "offset-syncs.topic.replication.factor": "1",
    "checkpoints.topic.replication.factor": "1",
    "refresh.topics.interval.seconds": "1",
    "sync.topic.configs.interval.seconds": "1",
    "emit.checkpoints.interval.seconds": "1",
    "sync.group.offsets.interval.seconds": "1",
    "consumer.poll.timeout.ms": "200",
}
Record = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


@dataclass
class SmallCluster:
    quorum: Quorum
    broker: BrokerProcess

    @property
    def bootstrap(self) -> str:
        return self.broker.address


@contextmanager
def small_cluster(directory: Path) -> Iterator[SmallCluster]:
    """One controller and one broker with their data under `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    with running_quorum(directory, size=1) as quorum:
        broker = make_broker(directory, quorum, 1)
        broker.args += list(SMALL_CLUSTER_BROKER_ARGS)
        broker.start()
        try:
            wait_for(
                lambda: 1 in quorum.image().cluster.unfenced_broker_ids(),
                timeout_s=30,
                what="the broker unfenced",
            )
            yield SmallCluster(quorum, broker)
        finally:
            broker.close()


class MirrorProcess:
    """`pykraft mirror` between two clusters, its output in `log_path`."""

    def __init__(
        self,
        directory: Path,
        source: str,
        target: str,
        *,
        topics: str,
        properties: Mapping[str, str],
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.log_path = directory / "mirror.log"
        self.config_path = directory / "mirror.properties"
        merged = {**SMALL_CLUSTER_MIRROR_PROPERTIES, "topics": topics, **properties}
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in merged.items()))
        self.command = [
            PYKRAFT, "mirror", "--source-bootstrap", source, "--target-bootstrap", target,
            "--topics", topics, "--config", str(self.config_path),
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def kill(self) -> None:
        """kill -9: no shutdown code runs."""
        assert self.process is not None and self.process.poll() is None, self.log()
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self, timeout_s: float = 60) -> int:
        """SIGTERM, then its exit code once it has stopped."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout_s)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextmanager
def running_mirror(process: MirrorProcess) -> Iterator[MirrorProcess]:
    process.start()
    try:
        yield process
    finally:
        process.close()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's high watermark; {} while the topic does not exist, or the brokers have
    not learned every partition the controller has (just after partitions were added)."""
    with AdminClient(bootstrap) as admin:
        if topic not in admin.list_topics():
            return {}
        (described,) = admin.describe_topics(topic)
        latest: OffsetSpec = "latest"
        tps = (TopicPartition(topic, p.partition) for p in described.partitions)
        try:
            found = admin.list_offsets(dict.fromkeys(tps, latest))
        except UnknownTopicOrPartitionError:
            return {}
    return {tp.partition: result.offset for tp, result in found.items()}


def read_records(bootstrap: str, topic: str, timeout_s: float = 60) -> dict[int, list[Record]]:
    """Every record of every partition, in offset order: what the mirror must keep equal."""
    ends = end_offsets(bootstrap, topic)
    assert ends, f"{topic} is not readable at {bootstrap}"
    records: dict[int, list[Record]] = {p: [] for p in ends}
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        tps = [TopicPartition(topic, p) for p in ends]
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)

        def done() -> bool:
            for record in consumer.poll(200):
                fields = (record.key, record.value, record.headers, record.timestamp)
                records[record.partition].append(fields)
            return all(len(records[p]) >= ends[p] for p in ends)

        wait_for(done, timeout_s=timeout_s, what=f"every record of {topic} read")
    return records
