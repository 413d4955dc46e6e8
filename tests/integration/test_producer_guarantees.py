"""The producer's guarantees against a real cluster (issue 5 §5.1-§5.3).

Three controllers and three brokers whose `test.drop.produce.responses.every` hook drops the
answer to every third Produce request that carries idempotent batches, after the append. The
tests share that cluster, each with its own topic (6 partitions, RF 3, min.insync.replicas=2).

- §5.1: an idempotent producer's retries after those lost answers never write a record twice
  and never reorder a partition: each partition holds exactly what was sent to it, in order, and
  the brokers' logs show answers were dropped (so duplicates did arrive and were dropped).
- §5.2: every compression codec round-trips through the brokers and is stored as sent; keys
  land in the partitions Kafka's murmur2 partitioner picks (hashes from Kafka's own tests).
- §5.3: with every broker stopped (SIGSTOP), a producer fills its buffer_memory, `send` blocks
  max_block_ms and then raises BufferExhaustedError; the buffer never exceeds its bound, and once
  the brokers run again every accepted record is delivered.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest

from pykraft.client import BufferExhaustedError, Consumer, ConsumerRecord, Producer, TopicPartition
from pykraft.proto.record_batch import Compression, iter_batches

from . import cluster
from .cluster import fetch_raw
from .controllers import Quorum, run_cli
from .processes import BrokerProcess, wait_for

pytestmark = pytest.mark.integration

# Each poll drains what is buffered (wait_for pauses between polls).
RECORDS_PER_POLL_MAX = 100_000

PARTITIONS = 6
DROP_EVERY = 3
DROPPED_LINE = b"response dropped by test.drop.produce.responses.every"

# Kafka's UtilsTest.testMurmur2 hashes; Kafka's partition is (hash & 0x7fffffff) % partitions.
KAFKA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

Cluster = tuple[Quorum, dict[int, BrokerProcess]]


@pytest.fixture(scope="module")
def lossy_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp_path = tmp_path_factory.mktemp("producer-guarantees")
    with cluster.running_cluster(
        tmp_path,
        topic="idempotence",
        partitions=PARTITIONS,
        broker_args=("--test-drop-produce-responses-every", str(DROP_EVERY)),
    ) as running:
        yield running


def _create_topic(quorum: Quorum, topic: str) -> None:
    created = run_cli(
        quorum, "topics", "create", "--topic", topic, "--partitions", str(PARTITIONS),
        "--replication-factor", "3", "--config", "min.insync.replicas=2",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    wait_for(
        lambda: cluster.full_isr(quorum, topic, PARTITIONS),
        timeout_s=30,
        what=f"every replica of {topic} in its ISR",
    )


def _bootstrap(brokers: dict[int, BrokerProcess]) -> str:
    return ",".join(b.address for b in brokers.values())


def _consume(brokers: dict[int, BrokerProcess], topic: str) -> dict[int, list[ConsumerRecord]]:
    """Everything in `topic` up to the end offsets taken first, per partition."""
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    received: dict[int, list[ConsumerRecord]] = {p: [] for p in range(PARTITIONS)}
    with Consumer(bootstrap_servers=_bootstrap(brokers), auto_offset_reset="earliest") as consumer:
        consumer.assign(partitions)
        ends = {tp.partition: end for tp, end in consumer.end_offsets(partitions).items()}

        def all_received() -> bool:
            for record in consumer.poll(500, records_max=RECORDS_PER_POLL_MAX):
                received[record.partition].append(record)
            return all(len(received[p]) >= end for p, end in ends.items())

        wait_for(all_received, timeout_s=60, what=f"everything in {topic} consumed")
    return received


def _dropped_answers(brokers: dict[int, BrokerProcess]) -> int:
    return sum(b.log_path.read_bytes().count(DROPPED_LINE) for b in brokers.values())


def test_lost_answers_are_retried_without_duplicates_or_reordering(
    lossy_cluster: Cluster,
) -> None:
    _, brokers = lossy_cluster
    per_partition = 400
    dropped_before = _dropped_answers(brokers)
    sent = {p: [b"p%d-%04d" % (p, i) for i in range(per_partition)] for p in range(PARTITIONS)}
    # Batches of about 12 records: a partition's 400 take at least 7 requests even when each
    # carries as many of its batches as may be in flight (5), so the hook drops answers.
    with Producer(
        bootstrap_servers=_bootstrap(brokers), linger_ms=2, batch_size=256, retry_backoff_ms=20
    ) as producer:
        futures = [
            producer.send("idempotence", sent[p][i], partition=p)
            for i in range(per_partition)
            for p in range(PARTITIONS)
        ]
        producer.flush(timeout=120)
        offsets = [future.result(timeout=0).offset for future in futures]
    assert min(offsets) >= 0
    assert _dropped_answers(brokers) - dropped_before >= 3, "the hook must have dropped answers"
    received = _consume(brokers, "idempotence")
    for p in range(PARTITIONS):
        values = [record.value for record in received[p]]
        assert values == sent[p], f"partition {p}: duplicates, gaps or reordering"


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_round_trips_and_is_stored_as_sent(lossy_cluster: Cluster, codec: str) -> None:
    quorum, brokers = lossy_cluster
    topic = f"codec-{codec}"
    _create_topic(quorum, topic)
    values = [(b"key-%d" % i, b"value-%d-" % i + b"z" * (i % 50)) for i in range(300)]
    with Producer(bootstrap_servers=_bootstrap(brokers), compression_type=codec) as producer:
        for key, value in values:
            producer.send(topic, value, key=key, partition=0, headers=[("h", key)])
        producer.flush(timeout=60)
    (records, *_) = _consume(brokers, topic).values()
    assert [(r.key, r.value) for r in records] == values
    assert all(r.headers == (("h", r.key),) for r in records)
    leader = cluster.registrations(quorum, topic)[0].leader
    stored = fetch_raw(brokers[leader], topic, 0, 0).records
    codecs = {header.compression for _, header in iter_batches(stored)}
    assert codecs == {Compression[codec.upper()]}


def test_keys_land_in_the_partitions_kafkas_partitioner_picks(lossy_cluster: Cluster) -> None:
    quorum, brokers = lossy_cluster
    _create_topic(quorum, "keyed")
    expected = {key: (h & 0x7FFFFFFF) % PARTITIONS for key, h in KAFKA_MURMUR2.items()}
    with Producer(bootstrap_servers=_bootstrap(brokers)) as producer:
        landed = {
            key: producer.send("keyed", b"v", key=key).result(30).partition for key in expected
        }
    assert landed == expected
    received = _consume(brokers, "keyed")
    assert {r.key: p for p, records in received.items() for r in records} == expected


def test_a_producer_faster_than_the_cluster_blocks_then_fails_and_stays_bounded(
    lossy_cluster: Cluster,
) -> None:
    quorum, brokers = lossy_cluster
    _create_topic(quorum, "backpressure")
    buffer_memory = 64 * 1024
    producer = Producer(
        bootstrap_servers=_bootstrap(brokers),
        buffer_memory=buffer_memory,
        max_block_ms=500,
        batch_size=4096,
    )
    accepted = []
    with producer:
        producer.send("backpressure", b"warm").result(30)  # metadata and connections ready
        for broker in brokers.values():
            assert broker.process is not None
            broker.process.send_signal(signal.SIGSTOP)
        try:
            value = b"x" * 1000
            started = time.monotonic()
            with pytest.raises(BufferExhaustedError, match="buffer_memory"):
                for _ in range(10 * buffer_memory // len(value)):
                    started = time.monotonic()
                    accepted.append(producer.send("backpressure", value))
                    assert producer._accumulator.used_bytes() <= buffer_memory
            blocked_s = time.monotonic() - started
            assert 0.45 <= blocked_s < 5, f"send blocked {blocked_s:.2f} s, max_block_ms is 500"
            assert len(accepted) < 2 * buffer_memory // len(value), "the buffer is bounded"
        finally:
            for broker in brokers.values():
                assert broker.process is not None
                broker.process.send_signal(signal.SIGCONT)
        producer.flush(timeout=60)
    assert all(future.result(timeout=0).offset >= 0 for future in accepted)
    received = _consume(brokers, "backpressure")
    assert sum(len(records) for records in received.values()) == len(accepted) + 1
