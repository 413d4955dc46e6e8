"""The idempotent producer end to end against in-process fake brokers over real gRPC: one
producer id and consecutive sequences, retries under the same id, new ids after the errors that
need one, and up to 5 batches of a partition in flight (Kafka's pipelining rules)."""

from __future__ import annotations

import grpc
import pytest

from pykraft.client import (
    MessageTooLargeError,
    OutOfOrderSequenceNumberError,
    Producer,
    TopicPartition,
)
from pykraft.client.producer.future import FutureRecordMetadata
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import BatchHeader
from tests.unit.client.fake_broker import WAIT_S, FakeCluster, running, wait_for

IN_FLIGHT_MAX = 5  # Kafka's max.in.flight.requests.per.connection default
T0 = TopicPartition("t", 0)


def _stored_headers(cluster: FakeCluster, tp: TopicPartition) -> list[BatchHeader]:
    with cluster.lock:
        return [BatchHeader.parse(bytes(batch)) for batch in cluster.logs[tp]]


def test_idempotent_batches_carry_one_producer_id_and_consecutive_sequences() -> None:
    with (
        running({"t": 2}) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap, batch_size=200, linger_ms=0) as producer,
    ):
        futures = [producer.send("t", b"v%03d" % i, partition=i % 2) for i in range(60)]
        for future in futures:
            future.result(WAIT_S)
        for partition in (0, 1):
            headers = _stored_headers(cluster, TopicPartition("t", partition))
            assert len(headers) > 1, "several batches per partition"
            assert {(h.producer_id, h.producer_epoch) for h in headers} == {(1001, 0)}
            sequences = [(h.base_sequence, h.record_count) for h in headers]
            expected_first = 0
            for first, count in sequences:
                assert first == expected_first
                expected_first += count
            assert expected_first == 30
        assert cluster.producer_ids_given == 1


def test_a_retried_batch_keeps_its_sequence() -> None:
    with (
        running({"t": 1}) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap, retry_backoff_ms=5) as producer,
    ):
        producer.send("t", b"a").result(WAIT_S)
        cluster.produce_errors[T0] = [
            common_pb2.NOT_LEADER_OR_FOLLOWER,
            common_pb2.NOT_LEADER_OR_FOLLOWER,
        ]
        producer.send("t", b"b").result(WAIT_S)
        headers = _stored_headers(cluster, T0)
        assert [(h.base_sequence, h.record_count) for h in headers] == [(0, 1), (1, 1)]
        assert cluster.requests[(1, "Produce")] == 4  # a, then b three times


@pytest.mark.parametrize("status", [grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE])
def test_a_produce_cut_off_by_the_transport_is_retried_under_the_same_id(
    status: grpc.StatusCode,
) -> None:
    """A broker stopping mid-request (CANCELLED) or a lost connection (UNAVAILABLE) leaves the
    outcome unknown: the batch goes again with its sequence, which idempotence makes safe, and
    neither fails nor costs the producer its id (issue 12 §2.2)."""
    with (
        running({"t": 1}) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap, retry_backoff_ms=5) as producer,
    ):
        producer.send("t", b"a").result(WAIT_S)
        cluster.rpc_aborts["Produce"] = [status, status]
        assert producer.send("t", b"b").result(WAIT_S).offset == 1
        first, second = _stored_headers(cluster, T0)
        assert (first.producer_id, first.base_sequence) == (1001, 0)
        assert (second.producer_id, second.base_sequence) == (1001, 1)
        assert cluster.producer_ids_given == 1


def test_unknown_producer_id_takes_a_new_id_and_sends_the_batch_again() -> None:
    with (
        running({"t": 1}) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap, retry_backoff_ms=5) as producer,
    ):
        producer.send("t", b"a").result(WAIT_S)
        cluster.produce_errors[T0] = [common_pb2.UNKNOWN_PRODUCER_ID]
        assert producer.send("t", b"b").result(WAIT_S).offset == 1
        first, second = _stored_headers(cluster, T0)
        assert (first.producer_id, first.base_sequence) == (1001, 0)
        assert (second.producer_id, second.base_sequence) == (1002, 0)


def test_out_of_order_sequence_fails_the_batch_and_later_sends_go_under_a_new_id() -> None:
    with (
        running({"t": 1}) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap, retry_backoff_ms=5) as producer,
    ):
        cluster.produce_errors[T0] = [common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER]
        with pytest.raises(OutOfOrderSequenceNumberError):
            producer.send("t", b"refused").result(WAIT_S)
        assert producer.send("t", b"next").result(WAIT_S).offset == 0
        (header,) = _stored_headers(cluster, T0)
        assert (header.producer_id, header.base_sequence) == (1002, 0)


def test_idempotence_settings_follow_kafka() -> None:
    with pytest.raises(ValueError, match="acks must be 'all'"):
        Producer(bootstrap_servers="127.0.0.1:1", acks=1, enable_idempotence=True)
    with pytest.raises(ValueError, match="at most 5"):
        Producer(
            bootstrap_servers="127.0.0.1:1",
            enable_idempotence=True,
            max_in_flight_requests_per_connection=6,
        )
    with running({"t": 1}) as cluster:
        # Left unset with acks=1, idempotence is off: batches carry no producer id.
        with Producer(bootstrap_servers=cluster.bootstrap, acks=1) as producer:
            producer.send("t", b"v").result(WAIT_S)
        (header,) = _stored_headers(cluster, T0)
        assert header.producer_id == -1
        assert cluster.producer_ids_given == 0


def test_pipelined_batches_survive_a_failure_in_their_midst_once_each_and_in_order() -> None:
    """Several requests of one partition in flight, a batch each (records sent one by one while
    Produce answers wait, as acks=all does); the second fails retriably, so the broker refuses
    those sent behind it OUT_OF_ORDER_SEQUENCE_NUMBER: they go again in order, and the
    partition holds every record once, in send order."""
    with running({"t": 1}) as cluster:
        cluster.produce_answer_delay_s = 0.2
        cluster.produce_errors[T0] = [common_pb2.NONE, common_pb2.NOT_ENOUGH_REPLICAS]
        with Producer(
            bootstrap_servers=cluster.bootstrap, batch_size=100, linger_ms=0, retry_backoff_ms=5
        ) as producer:
            values = [b"v%04d" % i for i in range(300)]
            futures = []
            for sent, value in enumerate(values[:IN_FLIGHT_MAX], start=1):
                futures.append(producer.send("t", value, partition=0))
                wait_for(lambda: cluster.requests[(1, "Produce")] >= sent)  # noqa: B023
            assert cluster.produces_in_flight_max > 1
            cluster.produce_answer_delay_s = 0
            futures += [producer.send("t", v, partition=0) for v in values[IN_FLIGHT_MAX:]]
            offsets = [f.result(WAIT_S).offset for f in futures]
        assert cluster.values(T0) == values
        assert offsets == list(range(len(values)))
        assert cluster.producer_ids_given == 1, "no batch failed for good"


def _send_one_behind_another(
    cluster: FakeCluster, producer: Producer
) -> tuple[FutureRecordMetadata, FutureRecordMetadata]:
    """b"a" then b"b" to partition 0, b"b" in a batch of its own sent once b"a"'s is out."""
    first = producer.send("t", b"a", partition=0)
    wait_for(lambda: cluster.requests[(1, "Produce")] >= 1)
    return first, producer.send("t", b"b", partition=0)


def test_a_batch_refused_behind_an_unresolved_one_goes_again_without_a_backoff() -> None:
    """OUT_OF_ORDER_SEQUENCE_NUMBER for a batch sent while an earlier one was unanswered means
    it overtook that one: it is sent again once the earlier one is acknowledged, with no
    retry_backoff_ms (a minute here) of its own, and nothing fails."""
    with running({"t": 1}) as cluster:
        cluster.produce_answer_delay_s = 0.2
        cluster.produce_errors[T0] = [common_pb2.NONE, common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER]
        with Producer(
            bootstrap_servers=cluster.bootstrap, linger_ms=0, retry_backoff_ms=60_000
        ) as producer:
            first, second = _send_one_behind_another(cluster, producer)
            assert second.result(WAIT_S).offset == 1
            assert first.result(0).offset == 0
        assert cluster.values(T0) == [b"a", b"b"]
        assert cluster.requests[(1, "Produce")] == 3
        assert cluster.producer_ids_given == 1


def test_a_first_batch_overtaken_on_the_broker_costs_no_new_producer_id() -> None:
    """The broker answers UNKNOWN_PRODUCER_ID to a batch with sequence above 0 while it has
    nothing of the producer on the partition: sent behind the partition's first batch, which
    failed (or has not been written yet), it goes again in order under the same id; a new id
    would let a batch whose answer was lost be written twice."""
    with running({"t": 1}) as cluster:
        cluster.produce_answer_delay_s = 0.2
        cluster.produce_errors[T0] = [common_pb2.NOT_ENOUGH_REPLICAS]
        with Producer(
            bootstrap_servers=cluster.bootstrap, linger_ms=0, retry_backoff_ms=5
        ) as producer:
            first, second = _send_one_behind_another(cluster, producer)
            assert [first.result(WAIT_S).offset, second.result(WAIT_S).offset] == [0, 1]
        assert cluster.values(T0) == [b"a", b"b"]
        assert cluster.producer_ids_given == 1


def _batches_queued_behind_the_producer_id(
    cluster: FakeCluster, producer: Producer, count: int
) -> list[FutureRecordMetadata]:
    """`count` records to partition 0, a batch each (batch_size 100), appended while the first
    InitProducerId fails and its retry waits out the producer's retry_backoff_ms: by the time
    the producer may send, every batch is queued and ready."""
    cluster.rpc_aborts["InitProducerId"] = [grpc.StatusCode.UNAVAILABLE]
    futures = [producer.send("t", b"v%d" % i + b"x" * 60, partition=0) for i in range(count)]
    assert cluster.requests[(1, "Produce")] == 0, "nothing may go before the producer id"
    return futures


def test_a_partitions_ready_batches_go_in_one_request_with_consecutive_offsets() -> None:
    """Batches queued for one partition go together, as many as may be in flight (5), in one
    Produce request: one gRPC call for all of them, whose cost dominates the client's CPU
    with Kafka's default batch.size. The broker appends them in order, all or none, so each
    batch's offsets follow the previous batch's."""
    with running({"t": 1}) as cluster:
        with Producer(
            bootstrap_servers=cluster.bootstrap, batch_size=100, linger_ms=0, retry_backoff_ms=1000
        ) as producer:
            futures = _batches_queued_behind_the_producer_id(cluster, producer, IN_FLIGHT_MAX)
            offsets = [future.result(WAIT_S).offset for future in futures]
        assert offsets == list(range(IN_FLIGHT_MAX))
        assert cluster.requests[(1, "Produce")] == 1
        assert [v[:2] for v in cluster.values(T0) if v] == [b"v%d" % i for i in range(5)]


def test_batches_refused_together_go_again_alone_and_only_the_refused_one_fails() -> None:
    """A refusal of a partition's batches that would fail them (here MESSAGE_TOO_LARGE) may be
    about one batch only, as with Kafka's one batch a request: they go again one at a time,
    and only the batch refused on its own fails; the others are delivered, in order."""
    with running({"t": 1}) as cluster:
        cluster.produce_errors[T0] = [
            common_pb2.MESSAGE_TOO_LARGE,  # the three together
            common_pb2.NONE,
            common_pb2.MESSAGE_TOO_LARGE,  # the second alone
        ]
        with Producer(
            bootstrap_servers=cluster.bootstrap, batch_size=100, linger_ms=0, retry_backoff_ms=1000
        ) as producer:
            first, second, third = _batches_queued_behind_the_producer_id(cluster, producer, 3)
            with pytest.raises(MessageTooLargeError):
                second.result(WAIT_S)
            assert [first.result(WAIT_S).offset, third.result(WAIT_S).offset] == [0, 1]
        assert [v[:2] for v in cluster.values(T0) if v] == [b"v0", b"v2"]
