"""Consumers in one rack for the fetch-from-follower tests (issue 15 §1.5), behind one small
interface: pykraft's with `client_rack` (over gRPC) and librdkafka's, through confluent-kafka,
with `client.rack` (over the Kafka listeners). Each reads every partition of a topic from the
beginning in fetches smaller than a batch (one batch per answer, so the brokers' request counts
show where reads went), and checks each record follows the one before it in its partition."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Final

import confluent_kafka

from pykraft.client import Consumer, TopicPartition

from .kafka_cluster import KafkaCluster, bootstrap_servers

RACK: Final = "rack-2"
READ_TIMEOUT_S: Final = 60
FETCH_BYTES_MAX: Final = 256

# (partition, offset) -> value, as acknowledged or as read.
Records = dict[tuple[int, int], bytes]
# One record polled: partition, offset, value.
Polled = tuple[int, int, bytes]


class RackReader(ABC):
    """A consumer in RACK of a topic's `partitions`; `read` more, then `close`."""

    def __init__(self) -> None:
        self._last: dict[int, int] = {}

    def read(self, count: int, got: Records) -> None:
        """Polls `count` more records into `got`, each the one after the last read of its
        partition: none missed, none repeated."""
        wanted = len(got) + count
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(got) < wanted:
            assert time.monotonic() < deadline, f"only {len(got)} of {wanted} read in time"
            for partition, offset, value in self._poll():
                assert offset == self._last.get(partition, -1) + 1, (partition, offset)
                self._last[partition] = offset
                got[partition, offset] = value

    @abstractmethod
    def _poll(self) -> list[Polled]:
        """What one poll brought."""

    @abstractmethod
    def close(self) -> None: ...


class PykraftReader(RackReader):
    def __init__(self, running: KafkaCluster, brokers: list[int], topic: str, partitions: int):
        super().__init__()
        self._consumer = Consumer(
            bootstrap_servers=",".join(running.brokers[i].address for i in brokers),
            auto_offset_reset="earliest",
            client_rack=RACK,
            max_partition_fetch_bytes=FETCH_BYTES_MAX,
        )
        self._consumer.assign([TopicPartition(topic, p) for p in range(partitions)])

    def _poll(self) -> list[Polled]:
        return [(r.partition, r.offset, r.value or b"") for r in self._consumer.poll(200)]

    def close(self) -> None:
        self._consumer.close()


class LibrdkafkaReader(RackReader):
    def __init__(self, running: KafkaCluster, brokers: list[int], topic: str, partitions: int):
        super().__init__()
        bootstrap = bootstrap_servers({i: running.kafka_ports[i] for i in brokers})
        self._consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "unused", "enable.auto.commit": False, "client.rack": RACK,
                "max.partition.fetch.bytes": FETCH_BYTES_MAX,
            }
        )  # fmt: skip
        self._consumer.assign(
            [
                confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                for p in range(partitions)
            ]
        )

    def _poll(self) -> list[Polled]:
        message = self._consumer.poll(0.2)
        if message is None:
            return []
        assert message.error() is None, message.error()
        partition, offset, value = message.partition(), message.offset(), message.value()
        assert partition is not None and offset is not None and isinstance(value, bytes)
        return [(partition, offset, value)]

    def close(self) -> None:
        self._consumer.close()


# name -> reader(cluster, brokers to bootstrap from, topic, partitions)
READERS: Final[dict[str, Callable[[KafkaCluster, list[int], str, int], RackReader]]] = {
    "pykraft": PykraftReader,
    "librdkafka": LibrdkafkaReader,
}
