"""Producer end to end against in-process fake brokers over real gRPC."""

from __future__ import annotations

import threading
import time

import pytest

from pykraft.client import (
    MessageTooLargeError,
    NotEnoughReplicasError,
    Producer,
    RecordMetadata,
    RequestTimedOutError,
    TopicPartition,
    UnknownTopicOrPartitionError,
)
from pykraft.client.producer.future import FutureRecordMetadata
from pykraft.client.producer.partitioner import partition_for_key
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import Compression, decode_batch
from tests.unit.client.fake_broker import WAIT_S, running, wait_for

IN_FLIGHT_MAX = 5  # Kafka's max.in.flight.requests.per.connection default
T0 = TopicPartition("t", 0)


def test_acks_all_delivers_in_order_with_consecutive_offsets() -> None:
    with running({"t": 1}) as cluster, Producer(bootstrap_servers=cluster.bootstrap) as producer:
        futures = [producer.send("t", b"v%d" % i, partition=0) for i in range(50)]
        results = [f.result(WAIT_S) for f in futures]
        assert [r.offset for r in results] == list(range(50))
        assert {(r.topic, r.partition) for r in results} == {("t", 0)}
        assert cluster.values(T0) == [b"v%d" % i for i in range(50)]


def test_keyed_records_land_in_the_murmur2_partition() -> None:
    keys = [b"k%d" % i for i in range(20)]
    with running({"t": 4}) as cluster, Producer(bootstrap_servers=cluster.bootstrap) as producer:
        results = [producer.send("t", b"v", key=k).result(WAIT_S) for k in keys]
        assert [r.partition for r in results] == [partition_for_key(k, 4) for k in keys]
        total = sum(len(cluster.values(TopicPartition("t", p))) for p in range(4))
        assert total == len(keys)


def test_timestamps_headers_and_compression_reach_the_log() -> None:
    with (
        running({"t": 1}) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap, compression_type="gzip") as producer,
    ):
        metadata = producer.send(
            "t", b"v", key=b"k", headers=[("h", b"1")], timestamp_ms=1234
        ).result(WAIT_S)
        assert metadata == RecordMetadata("t", 0, 0, 1234)
        (batch,) = cluster.logs[T0]
        assert batch[21 + 1] & 0x07 == Compression.GZIP  # attributes' low byte, codec bits
        (record,) = decode_batch(batch)
        assert (record.key, record.value, record.timestamp) == (b"k", b"v", 1234)
        assert [(h.key, h.value) for h in record.headers] == [("h", b"1")]


def test_acks_zero_reports_no_offset_but_the_record_arrives() -> None:
    with (
        running({"t": 1}) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap, acks=0) as producer,
    ):
        assert producer.send("t", b"v").result(WAIT_S).offset == -1
        producer.flush(WAIT_S)
        wait_for(lambda: cluster.values(T0) == [b"v"])


def test_not_leader_answer_refreshes_metadata_and_retries_on_the_new_leader() -> None:
    with (
        running({"t": 1}, brokers=2) as cluster,
        Producer(bootstrap_servers=cluster.brokers[0].address, retry_backoff_ms=10) as producer,
    ):
        assert producer.send("t", b"first").result(WAIT_S).offset == 0
        cluster.move_leader(T0, 2)
        assert producer.send("t", b"second").result(WAIT_S).offset == 1
        assert cluster.values(T0) == [b"first", b"second"]
        assert cluster.requests[(1, "Produce")] == 2, "the first try went to the old leader"
        assert cluster.requests[(2, "Produce")] == 1
        assert cluster.requests[(1, "Metadata")] + cluster.requests[(2, "Metadata")] >= 2


def test_retriable_errors_are_retried_until_success() -> None:
    with running({"t": 1}) as cluster:
        cluster.produce_errors[T0] = [common_pb2.NOT_ENOUGH_REPLICAS] * 2
        with Producer(bootstrap_servers=cluster.bootstrap, retry_backoff_ms=5) as producer:
            assert producer.send("t", b"v").result(WAIT_S).offset == 0
        assert cluster.requests[(1, "Produce")] == 3
        assert cluster.values(T0) == [b"v"]


def test_retries_zero_fails_on_the_first_retriable_error() -> None:
    with running({"t": 1}) as cluster:
        cluster.produce_errors[T0] = [common_pb2.NOT_ENOUGH_REPLICAS]
        producer = Producer(bootstrap_servers=cluster.bootstrap, retries=0)
        with pytest.raises(NotEnoughReplicasError, match="NOT_ENOUGH_REPLICAS"):
            producer.send("t", b"v").result(WAIT_S)
        producer.close()
        assert cluster.requests[(1, "Produce")] == 1


def test_non_retriable_errors_fail_the_future_with_the_typed_error() -> None:
    with running({"t": 1}) as cluster:
        cluster.produce_errors[T0] = [common_pb2.MESSAGE_TOO_LARGE]
        reports: list[tuple[RecordMetadata | None, BaseException | None]] = []
        with Producer(bootstrap_servers=cluster.bootstrap) as producer:
            future = producer.send("t", b"v", on_delivery=lambda m, e: reports.append((m, e)))
            with pytest.raises(MessageTooLargeError):
                future.result(WAIT_S)
        assert cluster.requests[(1, "Produce")] == 1, "not retried"
        assert len(reports) == 1 and isinstance(reports[0][1], MessageTooLargeError)


def test_delivery_counts_tell_delivered_and_failed_records_after_flush() -> None:
    with running({"t": 1}) as cluster:
        with Producer(bootstrap_servers=cluster.bootstrap, linger_ms=0) as producer:
            for i in range(10):
                producer.send("t", b"v%d" % i)
            producer.flush(WAIT_S)
            counts = producer.delivery_counts()
            assert (counts.records_delivered, counts.records_failed) == (10, 0)
            assert counts.last_error is None
            cluster.produce_errors[T0] = [common_pb2.MESSAGE_TOO_LARGE]
            with pytest.raises(MessageTooLargeError):
                producer.send("t", b"refused").result(WAIT_S)
            producer.flush(WAIT_S)
            counts = producer.delivery_counts()
        assert (counts.records_delivered, counts.records_failed) == (10, 1)
        assert isinstance(counts.last_error, MessageTooLargeError)


def test_delivery_timeout_fails_records_that_never_succeed() -> None:
    with running({"t": 1}) as cluster:
        cluster.produce_errors[T0] = [common_pb2.NOT_ENOUGH_REPLICAS] * 10_000
        producer = Producer(
            bootstrap_servers=cluster.bootstrap,
            linger_ms=0,
            request_timeout_ms=100,
            delivery_timeout_ms=300,
            retry_backoff_ms=20,
        )
        started = time.monotonic()
        with pytest.raises(RequestTimedOutError, match="delivery_timeout_ms=300"):
            producer.send("t", b"v").result(WAIT_S)
        assert 0.25 < time.monotonic() - started < 3
        producer.close()
        assert cluster.values(T0) == []


def test_close_sends_lingering_records_first() -> None:
    with running({"t": 1}) as cluster:
        producer = Producer(bootstrap_servers=cluster.bootstrap, linger_ms=60_000)
        future = producer.send("t", b"v")
        assert not future.done(), "still lingering"
        producer.close()
        assert future.result(0).offset == 0
        assert cluster.values(T0) == [b"v"]
        with pytest.raises(RuntimeError, match="closed"):
            producer.send("t", b"w")


def test_close_with_zero_timeout_fails_what_cannot_be_sent() -> None:
    with running({"t": 1}) as cluster:
        cluster.move_leader(T0, 7)  # a leader nobody can reach: records stay queued
        producer = Producer(bootstrap_servers=cluster.bootstrap, linger_ms=0)
        future = producer.send("t", b"v")
        producer.close(timeout=0)
        with pytest.raises(Exception, match="closed before"):
            future.result(WAIT_S)


def test_flush_waits_for_every_record_sent_before_it() -> None:
    with (
        running({"t": 2}) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap, linger_ms=60_000) as producer,
    ):
        futures: list[FutureRecordMetadata] = [producer.send("t", b"%d" % i) for i in range(10)]
        producer.flush(WAIT_S)
        assert all(f.done() and f.exception() is None for f in futures)


def test_sends_from_many_threads_all_arrive() -> None:
    with (
        running({"t": 3}) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap, batch_size=200) as producer,
    ):

        def send_some(n: int) -> None:
            for i in range(50):
                producer.send("t", b"%d-%d" % (n, i), key=b"%d" % n)

        threads = [threading.Thread(target=send_some, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT_S)
        producer.flush(WAIT_S)
        per_partition = [cluster.values(TopicPartition("t", p)) for p in range(3)]
        assert sum(len(v) for v in per_partition) == 200
        for n in range(4):  # one key, one partition, in send order
            values = per_partition[partition_for_key(b"%d" % n, 3)]
            assert [v for v in values if v and v.startswith(b"%d-" % n)] == [
                b"%d-%d" % (n, i) for i in range(50)
            ]


def test_unknown_topic_fails_after_max_block_ms() -> None:
    with (
        running({"t": 1}) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap, max_block_ms=200) as producer,
    ):
        with pytest.raises(UnknownTopicOrPartitionError, match="'nope' not in the cluster"):
            producer.send("nope", b"v")
        with pytest.raises(ValueError, match=r"partition 3 is not in \[0, 1\)"):
            producer.send("t", b"v", partition=3)


def test_a_partition_added_after_the_topic_was_learned_is_waited_for() -> None:
    """Kafka's waitOnMetadata: a partition beyond the partition count the producer knows makes
    it ask for metadata again until the partition shows (the topic grew meanwhile), and only
    after max_block_ms without it is the partition refused."""
    with running({"t": 1}) as cluster, Producer(bootstrap_servers=cluster.bootstrap) as producer:
        assert producer.send("t", b"first", partition=0).result(WAIT_S).partition == 0
        grown = TopicPartition("t", 1)
        with cluster.lock:
            cluster.partitions[grown] = 1
            cluster.epochs[grown] = 0
        assert producer.send("t", b"second", partition=1).result(WAIT_S).partition == 1
        assert cluster.values(grown) == [b"second"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"acks": 2}, "acks must be 'all', -1, 0 or 1"),
        ({"compression_type": "brotli"}, "compression_type must be one of"),
        ({"linger_ms": -1}, "linger_ms must be an integer of at least 0"),
        ({"batch_size": "big"}, "batch_size must be an integer"),
        ({"delivery_timeout_ms": 1000}, "delivery_timeout_ms .* must be at least"),
        ({"bootstrap_servers": "nohost"}, "bad address"),
    ],
)
def test_bad_config_values_raise_value_error(kwargs: dict[str, object], message: str) -> None:
    config: dict[str, object] = {"bootstrap_servers": "127.0.0.1:1", **kwargs}
    with pytest.raises(ValueError, match=message):
        Producer(**config)  # type: ignore[arg-type]


def test_unknown_config_names_raise_type_error_naming_them() -> None:
    with pytest.raises(TypeError, match="linger_msec"):
        Producer(bootstrap_servers="127.0.0.1:1", linger_msec=5)  # type: ignore[call-arg]


def test_a_record_larger_than_max_request_size_is_refused_at_send() -> None:
    with (
        running({"t": 1}) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap, max_request_size=1000) as producer,
    ):
        with pytest.raises(MessageTooLargeError, match="max_request_size"):
            producer.send("t", b"x" * 1000)
        assert producer.send("t", b"x" * 900).result(WAIT_S).offset == 0


def test_requests_stay_within_max_request_size() -> None:
    with (
        running({"t": 4}) as cluster,
        Producer(
            bootstrap_servers=cluster.bootstrap,
            max_request_size=1200,
            batch_size=1000,
            linger_ms=50,
        ) as producer,
    ):
        futures = [producer.send("t", b"x" * 400, partition=p) for p in range(4)]
        for future in futures:
            future.result(WAIT_S)
        # Four ~480-byte batches: at most two fit in one request.
        assert cluster.requests[(1, "Produce")] >= 2


def test_a_request_to_a_broker_takes_its_lingering_batches_along() -> None:
    """As Kafka's drain: once a request goes to a broker, every partition it leads sends its
    batch, lingering or not, instead of a request of its own when its linger ends."""
    with (
        running({"t": 2}) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap, batch_size=1000, linger_ms=60_000) as p,
    ):
        lingering = p.send("t", b"waits", partition=1)
        first = p.send("t", b"x" * 600, partition=0)
        p.send("t", b"y" * 600, partition=0)  # a second batch: the first one is full, it goes
        assert first.result(WAIT_S).offset == 0
        assert lingering.result(WAIT_S).offset == 0  # long before its linger
        assert cluster.requests[(1, "Produce")] == 1
