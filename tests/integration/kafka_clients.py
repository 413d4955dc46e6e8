"""Three unchanged Kafka clients behind one small interface, so that the same tests run against
each (issue 14 §4 items 1-3): confluent-kafka (librdkafka), kafka-python and aiokafka.

Every client produces with acks=all and idempotence, consumes assigned partitions from the
beginning, consumes in a group committing what it read, and creates, describes and deletes a topic
through its own admin API. Records go in as `Outgoing` and come back as `Landed` (where the broker
put them), so tests compare exact sets; every wait has a deadline and nothing sleeps.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NamedTuple, Protocol, TypeVar

import aiokafka
import aiokafka.admin
import confluent_kafka
import confluent_kafka.admin
import kafka
import kafka.admin
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

Headers = tuple[tuple[str, bytes], ...]
WAIT_S = 30.0
T = TypeVar("T")


class Outgoing(NamedTuple):
    key: bytes
    value: bytes
    headers: Headers


class Landed(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers


def landed_at(partition: int, offset: int, record: Outgoing) -> Landed:
    """`record` as acknowledged at `partition` and `offset`."""
    return Landed(partition, offset, record.key, record.value, record.headers)


def headers_of(raw: Iterable[tuple[str, str | bytes | None]] | None) -> Headers:
    """A client's headers (list, tuple or None) as a tuple of (name, bytes)."""
    return tuple(
        (name, value.encode() if isinstance(value, str) else value or b"")
        for name, value in raw or ()
    )


def collect(poll: Callable[[], list[Landed]], count: int) -> list[Landed]:
    """Polls until `count` records arrived (failing at the deadline); what arrived, in order."""
    got: list[Landed] = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < count:
        assert time.monotonic() < deadline, f"{len(got)} of {count} records after {WAIT_S}s"
        got += poll()
    return got


def replicas_by_partition(
    found: dict[str, Any], partition_key: str, replicas_key: str
) -> dict[int, list[int]] | None:
    """Replica ids by partition from a Metadata topic as a dict (kafka-python and aiokafka name
    the keys differently); None for UNKNOWN_TOPIC_OR_PARTITION (3), the broker not caught up."""
    if found["error_code"] == 3:
        return None
    assert found["error_code"] == 0, found
    return {p[partition_key]: list(p[replicas_key]) for p in found["partitions"]}


class Client(Protocol):
    """What the tests ask of each Kafka client; `bootstrap` is "host:port,host:port"."""

    def produce(self, bootstrap: str, topic: str, records: list[Outgoing]) -> list[Landed]: ...

    def consume_assigned(
        self, bootstrap: str, topic: str, partitions: int, count: int
    ) -> list[Landed]: ...

    def consume_group(self, bootstrap: str, topic: str, group: str, count: int) -> list[Landed]:
        """Subscribes in `group`, reads `count` records, commits them, and leaves."""
        ...

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None: ...

    def describe_topic(self, bootstrap: str, topic: str) -> dict[int, list[int]] | None:
        """Replica ids by partition; None while the broker asked does not know `topic` yet."""
        ...

    def delete_topic(self, bootstrap: str, topic: str) -> None: ...


class Confluent:
    """confluent-kafka, the Python binding of librdkafka."""

    def produce(self, bootstrap: str, topic: str, records: list[Outgoing]) -> list[Landed]:
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}
        )
        landed: list[Landed] = []

        def delivered(record: Outgoing) -> Callable[[object, confluent_kafka.Message], None]:
            def report(error: object, message: confluent_kafka.Message) -> None:
                assert error is None, error
                landed.append(landed_at(*Confluent._where(message), record))

            return report

        for record in records:
            producer.produce(
                topic, record.value, record.key, headers=list(record.headers),
                on_delivery=delivered(record),
            )  # fmt: skip
            producer.poll(0)
        assert producer.flush(WAIT_S) == 0, "records left undelivered"
        return landed

    @staticmethod
    def _where(message: confluent_kafka.Message) -> tuple[int, int]:
        """(partition, offset) of a delivered or consumed message, which has both."""
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None
        return partition, offset

    @staticmethod
    def _poll(consumer: confluent_kafka.Consumer) -> list[Landed]:
        message = consumer.poll(0.5)
        if message is None:
            return []
        assert message.error() is None, message.error()
        headers = message.headers()
        assert not isinstance(headers, dict)  # consumed headers come as a list
        return [
            Landed(*Confluent._where(message), message.key(), message.value(), headers_of(headers))
        ]

    def consume_assigned(
        self, bootstrap: str, topic: str, partitions: int, count: int
    ) -> list[Landed]:
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
        )
        try:
            consumer.assign(
                [
                    confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                    for p in range(partitions)
                ]
            )
            return collect(lambda: self._poll(consumer), count)
        finally:
            consumer.close()

    def consume_group(self, bootstrap: str, topic: str, group: str, count: int) -> list[Landed]:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap, "group.id": group,
                "auto.offset.reset": "earliest", "enable.auto.commit": False,
            }
        )  # fmt: skip
        try:
            consumer.subscribe([topic])
            got = collect(lambda: self._poll(consumer), count)
            consumer.commit(asynchronous=False)
            return got
        finally:
            consumer.close()

    def _admin(self, bootstrap: str) -> confluent_kafka.admin.AdminClient:
        return confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        new = NewTopic(topic, num_partitions=partitions, replication_factor=3)
        admin = self._admin(bootstrap)  # held: the futures fail once the handle is gone
        admin.create_topics([new])[topic].result(WAIT_S)

    def describe_topic(self, bootstrap: str, topic: str) -> dict[int, list[int]] | None:
        admin = self._admin(bootstrap)
        described = admin.describe_topics(
            confluent_kafka.TopicCollection([topic]), request_timeout=WAIT_S
        )[topic]
        try:
            found = described.result(WAIT_S)
        except confluent_kafka.KafkaException as error:
            if error.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART:
                return None
            raise
        return {p.id: [node.id for node in p.replicas] for p in found.partitions}

    def delete_topic(self, bootstrap: str, topic: str) -> None:
        admin = self._admin(bootstrap)
        admin.delete_topics([topic])[topic].result(WAIT_S)


class KafkaPython:
    """kafka-python, pure Python."""

    def produce(self, bootstrap: str, topic: str, records: list[Outgoing]) -> list[Landed]:
        producer = kafka.KafkaProducer(
            bootstrap_servers=bootstrap.split(","), acks="all", enable_idempotence=True
        )
        try:
            futures = [
                (r, producer.send(topic, r.value, r.key, headers=list(r.headers))) for r in records
            ]
            producer.flush(WAIT_S)
            metas = [(r, future.get(timeout=WAIT_S)) for r, future in futures]
            return [landed_at(meta.partition, meta.offset, r) for r, meta in metas]
        finally:
            producer.close()

    @staticmethod
    def _poll(consumer: kafka.KafkaConsumer) -> list[Landed]:
        batches = consumer.poll(timeout_ms=500)
        return [
            Landed(m.partition, m.offset, m.key, m.value, headers_of(m.headers))
            for messages in batches.values()
            for m in messages
        ]

    def consume_assigned(
        self, bootstrap: str, topic: str, partitions: int, count: int
    ) -> list[Landed]:
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=bootstrap.split(","), enable_auto_commit=False
        )
        try:
            consumer.assign([kafka.TopicPartition(topic, p) for p in range(partitions)])
            consumer.seek_to_beginning()
            return collect(lambda: self._poll(consumer), count)
        finally:
            consumer.close()

    def consume_group(self, bootstrap: str, topic: str, group: str, count: int) -> list[Landed]:
        consumer = kafka.KafkaConsumer(
            topic, bootstrap_servers=bootstrap.split(","), group_id=group,
            auto_offset_reset="earliest", enable_auto_commit=False,
        )  # fmt: skip
        try:
            got = collect(lambda: self._poll(consumer), count)
            consumer.commit()
            return got
        finally:
            consumer.close()

    def _admin(self, bootstrap: str) -> kafka.admin.KafkaAdminClient:
        return kafka.admin.KafkaAdminClient(bootstrap_servers=bootstrap.split(","))

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        admin = self._admin(bootstrap)
        try:
            admin.create_topics([kafka.admin.NewTopic(topic, partitions, 3)])
        finally:
            admin.close()

    def describe_topic(self, bootstrap: str, topic: str) -> dict[int, list[int]] | None:
        admin = self._admin(bootstrap)
        try:
            (found,) = admin.describe_topics([topic])
        finally:
            admin.close()
        return replicas_by_partition(found, "partition_index", "replica_nodes")

    def delete_topic(self, bootstrap: str, topic: str) -> None:
        admin = self._admin(bootstrap)
        try:
            admin.delete_topics([topic])
        finally:
            admin.close()


async def _collect_async(consumer: aiokafka.AIOKafkaConsumer, count: int) -> list[Landed]:
    """`collect` for aiokafka: getmany until `count` records arrived, failing at the deadline."""
    got: list[Landed] = []
    async with asyncio.timeout(WAIT_S):
        while len(got) < count:
            batches = await consumer.getmany(timeout_ms=500)
            got += [
                Landed(m.partition, m.offset, m.key, m.value, headers_of(m.headers))
                for messages in batches.values()
                for m in messages
            ]
    return got


class AioKafka:
    """aiokafka, asyncio; each call runs its own event loop."""

    def produce(self, bootstrap: str, topic: str, records: list[Outgoing]) -> list[Landed]:
        async def run() -> list[Landed]:
            producer = aiokafka.AIOKafkaProducer(
                bootstrap_servers=bootstrap, acks="all", enable_idempotence=True
            )
            await producer.start()
            try:
                sent = [
                    (r, await producer.send(topic, r.value, r.key, headers=list(r.headers)))
                    for r in records
                ]
                metas = [(r, await future) for r, future in sent]
            finally:
                await producer.stop()
            return [landed_at(meta.partition, meta.offset, r) for r, meta in metas]

        return asyncio.run(run())

    def consume_assigned(
        self, bootstrap: str, topic: str, partitions: int, count: int
    ) -> list[Landed]:
        async def run() -> list[Landed]:
            consumer = aiokafka.AIOKafkaConsumer(
                bootstrap_servers=bootstrap, enable_auto_commit=False
            )
            await consumer.start()
            try:
                consumer.assign([aiokafka.TopicPartition(topic, p) for p in range(partitions)])
                await consumer.seek_to_beginning()
                return await _collect_async(consumer, count)
            finally:
                await consumer.stop()

        return asyncio.run(run())

    def consume_group(self, bootstrap: str, topic: str, group: str, count: int) -> list[Landed]:
        async def run() -> list[Landed]:
            consumer = aiokafka.AIOKafkaConsumer(
                topic, bootstrap_servers=bootstrap, group_id=group,
                auto_offset_reset="earliest", enable_auto_commit=False,
            )  # fmt: skip
            await consumer.start()
            try:
                got = await _collect_async(consumer, count)
                await consumer.commit()
                return got
            finally:
                await consumer.stop()

        return asyncio.run(run())

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        new = aiokafka.admin.NewTopic(topic, partitions, 3)
        asyncio.run(self._admin(bootstrap, lambda admin: admin.create_topics([new])))

    def describe_topic(self, bootstrap: str, topic: str) -> dict[int, list[int]] | None:
        (found,) = asyncio.run(self._admin(bootstrap, lambda a: a.describe_topics([topic])))
        return replicas_by_partition(found, "partition", "replicas")

    def delete_topic(self, bootstrap: str, topic: str) -> None:
        asyncio.run(self._admin(bootstrap, lambda admin: admin.delete_topics([topic])))

    @staticmethod
    async def _admin(
        bootstrap: str, call: Callable[[aiokafka.admin.AIOKafkaAdminClient], Awaitable[T]]
    ) -> T:
        """`call` on a started admin client, closed after."""
        admin = aiokafka.admin.AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            return await call(admin)
        finally:
            await admin.close()


CLIENTS: dict[str, Client] = {
    "confluent-kafka": Confluent(),
    "kafka-python": KafkaPython(),
    "aiokafka": AioKafka(),
}
