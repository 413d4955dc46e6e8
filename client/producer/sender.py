"""The producer's background thread: drains ready batches (with, as Kafka's drain, the lingering
batches of the partitions the same broker leads) and sends them, one Produce request per leader
broker, keeping at most `max_in_flight_requests_per_connection` (Kafka's
max.in.flight.requests.per.connection) requests in flight per broker.

With idempotence a partition keeps up to that many batches in flight too, so each partition
moves several batches per acks=all round trip; without it, one (module `in_flight` has the
ordering rules, Kafka's). Unlike Kafka's one batch per partition a request, a request carries
every batch of a partition that may go (the broker appends them all or none, at consecutive
offsets): a gRPC call costs the client a few hundred microseconds of CPU, which with Kafka's
default batch.size (16 KiB, about 130 records of 100 bytes) was most of its CPU per record. A
retry still goes alone, and batches refused together by an error that would fail them go again
one at a time, so only the batch the error is about fails.

Retriable errors put the batch back in its queue in the order it was first sent, after
`retry_backoff_ms` (refreshing metadata first when the error says the leader moved), until
`retries` or `delivery_timeout_ms` runs out; other errors fail the batch's futures with the typed
KafkaError.

With idempotence (module `idempotence`), nothing is sent until the producer holds an id from
InitProducerId; each batch is stamped with the id, epoch and its partition's next sequence at
its first send and keeps those bytes for every retry, so the broker drops a retry whose first
attempt was written. A stamped batch that fails, UNKNOWN_PRODUCER_ID and refused sequences
reset the identity once nothing is in flight (UNKNOWN_PRODUCER_ID retries the batch under the
new id; the others fail it); batches refused only because an earlier one failed go again under
the new id.

A request carries at most `max_request_size` bytes of batches (a single larger batch still goes
alone: the accumulator refuses records that could not fit).
"""

from __future__ import annotations

import queue
import threading
from collections import defaultdict
from dataclasses import dataclass

from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.clock import monotonic_ms
from pykraft.client.cluster_metadata import ClusterMetadata
from pykraft.client.errors import (
    DuplicateSequenceNumberError,
    InvalidMetadataError,
    KafkaError,
    OutOfOrderSequenceNumberError,
    RequestTimedOutError,
    UnknownProducerIdError,
    UnknownServerError,
    error_for,
)
from pykraft.client.producer.accumulator import ProducerBatch, RecordAccumulator
from pykraft.client.producer.config import ProducerConfig
from pykraft.client.producer.idempotence import ProducerIdentity
from pykraft.client.producer.in_flight import InFlightBatches
from pykraft.client.types import TopicPartition
from pykraft.proto import broker_pb2, common_pb2
from pykraft.proto.record_batch import NO_PRODUCER_ID


@dataclass(frozen=True)
class _Completion:
    address: str
    batches: list[ProducerBatch]
    result: broker_pb2.ProduceResponse | KafkaError


@dataclass(frozen=True)
class _IdentityCompletion:
    result: broker_pb2.InitProducerIdResponse | KafkaError


class Sender:
    """Owns the sender thread; `close` lets it finish what was appended, or aborts it."""

    def __init__(
        self,
        accumulator: RecordAccumulator,
        metadata: ClusterMetadata,
        pool: ConnectionPool,
        config: ProducerConfig,
        wakeup: threading.Event,
    ) -> None:
        self._accumulator = accumulator
        self._metadata = metadata
        self._pool = pool
        self._config = config
        self._wakeup = wakeup
        self._completions: queue.SimpleQueue[_Completion | _IdentityCompletion]
        self._completions = queue.SimpleQueue()
        self._identity = ProducerIdentity()
        self._identity_retry_at_ms = 0
        self._identity_error: KafkaError | None = None
        self._in_flight: dict[str, int] = defaultdict(int)
        self._in_flight_batches: set[ProducerBatch] = set()
        in_flight_max = config.max_in_flight_requests_per_connection
        self._unresolved = InFlightBatches(in_flight_max if config.idempotent else 1)
        self._running = True
        self._forced = False
        self._thread = threading.Thread(target=self._run, name="pykraft-producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout_s: float | None) -> None:
        """Sends what is queued within `timeout_s`; then fails whatever is left."""
        self._running = False
        self._accumulator.close()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._forced = True
            self._wakeup.set()
            self._thread.join()

    def _has_work(self) -> bool:
        if self._forced:
            return False
        return self._running or self._accumulator.has_pending() or bool(self._in_flight_batches)

    def _run(self) -> None:
        reason = "the producer was closed before these records were delivered"
        try:
            while self._has_work():
                delay_ms = self._run_once(monotonic_ms())
                if self._has_work():
                    self._wakeup.wait(delay_ms / 1000)
        except Exception as e:  # a bug must fail the futures, not leave them hanging
            self._forced = True
            reason = f"the producer's sender thread failed: {e!r}"
            raise
        finally:
            if self._forced:
                self._abort(KafkaError(reason))

    def _abort(self, error: KafkaError) -> None:
        self._accumulator.close()
        for batch in list(self._in_flight_batches):
            self._finish(batch, error)
        self._accumulator.abort_all(error)

    def _run_once(self, now_ms: int) -> int:
        """One round of sending; returns how long (ms) nothing needs doing unless woken."""
        self._wakeup.clear()
        while not self._completions.empty():
            self._on_completion(self._completions.get(), now_ms)
        for batch in self._accumulator.expire(now_ms, self._config.delivery_timeout_ms):
            self._finish(batch, self._expired_error(batch))
        self._metadata.maybe_refresh(now_ms)
        in_flight_max = self._config.max_in_flight_requests_per_connection
        # Each round sends at most one request per broker; a broker takes no more than
        # in_flight_max, so that many rounds are all one pass can use.
        for _ in range(in_flight_max):
            ready, lingering, delay_ms = self._accumulator.ready(now_ms)
            if ready and not self._identity_ready(now_ms):
                return min(delay_ms, max(self._config.retry_backoff_ms, 1))
            sent = False
            may_send = self._unresolved.may_send
            for address, tps in self._by_leader(ready, lingering).items():
                if self._in_flight[address] < in_flight_max:
                    sent = (
                        self._send(address, self._accumulator.drain(tps, may_send, now_ms)) or sent
                    )
            if not sent:
                break
        return delay_ms

    def _identity_ready(self, now_ms: int) -> bool:
        """Whether batches may go out; without idempotence always. Otherwise asks the cluster
        for a producer id when none is held (or a reset is due and nothing is in flight)."""
        identity = self._identity
        if not self._config.idempotent or identity.ready:
            return True
        if identity.reset_wanted and self._in_flight_batches:
            return False  # the old id's answers first: they may still succeed
        if identity.requesting or now_ms < self._identity_retry_at_ms:
            return False
        address = self._metadata.any_broker_address()
        identity.requesting = True
        request = broker_pb2.InitProducerIdRequest(
            transactional_id="",
            transaction_timeout_ms=0,
            producer_id=identity.producer_id,
            producer_epoch=identity.producer_epoch,
        )

        def on_done(result: broker_pb2.InitProducerIdResponse | KafkaError) -> None:
            self._completions.put(_IdentityCompletion(result))
            self._wakeup.set()

        self._pool.get(address).call_async(
            "InitProducerId",
            request,
            broker_pb2.InitProducerIdResponse,
            self._config.request_timeout_ms,
            on_done,
        )
        return False

    def _by_leader(
        self, ready: list[TopicPartition], lingering: list[TopicPartition]
    ) -> dict[str, list[TopicPartition]]:
        """The partitions to drain, by leader address: the ready ones, and, as Kafka's drain
        does, the lingering ones of a leader a request goes to anyway (their records wait
        less, and the broker gets one request instead of one per partition's linger)."""
        grouped: dict[str, list[TopicPartition]] = defaultdict(list)
        for tp in ready:
            leader = self._metadata.leader(tp)
            if leader is None:
                self._metadata.add_topics([tp.topic])
                self._metadata.request_update()
                continue
            grouped[leader.address].append(tp)
        for tp in lingering:
            leader = self._metadata.leader(tp)
            if leader is not None and leader.address in grouped:
                grouped[leader.address].append(tp)
        return grouped

    def _send(self, address: str, batches: list[ProducerBatch]) -> bool:
        """Sends `batches` in one request; whether there was anything to send."""
        if not batches:
            return False
        request_bytes_max = self._config.max_request_size
        size_bytes = 0
        for count, batch in enumerate(batches):
            batch_bytes = len(self._sealed(batch))
            if count and size_bytes + batch_bytes > request_bytes_max:
                self._accumulator.put_back(batches[count:])
                batches = batches[:count]
                break
            size_bytes += batch_bytes
        # Only a batch alone may pass max_request_size (the accumulator refused larger records).
        assert len(batches) == 1 or size_bytes <= request_bytes_max, (len(batches), size_bytes)
        request = self._request(batches)
        self._in_flight[address] += 1
        in_flight_max = self._config.max_in_flight_requests_per_connection
        assert self._in_flight[address] <= in_flight_max, (address, self._in_flight[address])
        self._in_flight_batches.update(batches)
        for batch in batches:
            self._unresolved.sent(batch)

        def on_done(result: broker_pb2.ProduceResponse | KafkaError) -> None:
            self._completions.put(_Completion(address, batches, result))
            self._wakeup.set()

        self._pool.get(address).call_async(
            "Produce",
            request,
            broker_pb2.ProduceResponse,
            self._config.request_timeout_ms,
            on_done,
        )
        if self._config.acks_id == 0:  # nothing to wait for: delivered once sent, offset unknown
            for batch in batches:
                batch.complete(-1, -1)
        return True

    def _sealed(self, batch: ProducerBatch) -> bytes:
        """The batch's bytes, stamped at its first send (again if the producer id changed)."""
        identity = self._identity
        if not self._config.idempotent:
            return (
                batch.records if batch.records is not None else batch.seal(NO_PRODUCER_ID, -1, -1)
            )
        if batch.records is not None and batch.producer_id == identity.producer_id:
            return batch.records
        sequence = identity.take_sequence(batch.tp, batch.builder.record_count())
        return batch.seal(identity.producer_id, identity.producer_epoch, sequence)

    def _request(self, batches: list[ProducerBatch]) -> broker_pb2.ProduceRequest:
        """One ProducePartition per partition, its batches' bytes back to back in queue order
        (the broker appends them all or none, giving them consecutive offsets)."""
        topics: dict[str, dict[int, list[bytes]]] = defaultdict(dict)
        for batch in batches:
            assert batch.records is not None, "sealed before the request is built"
            topics[batch.tp.topic].setdefault(batch.tp.partition, []).append(batch.records)
        return broker_pb2.ProduceRequest(
            acks=self._config.acks_id,
            timeout_ms=self._config.request_timeout_ms,
            topics=[
                broker_pb2.ProduceTopic(
                    topic=topic,
                    partitions=[
                        broker_pb2.ProducePartition(partition=p, records=b"".join(records))
                        for p, records in partitions.items()
                    ],
                )
                for topic, partitions in topics.items()
            ],
        )

    def _on_completion(self, completion: _Completion | _IdentityCompletion, now_ms: int) -> None:
        if isinstance(completion, _IdentityCompletion):
            self._on_identity(completion.result, now_ms)
            return
        self._in_flight[completion.address] -= 1
        assert self._in_flight[completion.address] >= 0
        for batch in completion.batches:
            self._in_flight_batches.discard(batch)
        if self._config.acks_id == 0:
            for batch in completion.batches:
                self._unresolved.resolved(batch)
                self._accumulator.deallocate(batch)
            return
        result = completion.result
        if isinstance(result, KafkaError):
            for batch in completion.batches:
                self._on_partition_error(batch, result, now_ms)
            return
        answers = {(t.topic, p.partition): p for t in result.topics for p in t.partitions}
        for tp, batches in _by_partition(completion.batches).items():
            answer = answers.get((tp.topic, tp.partition))
            if answer is None:
                for batch in batches:
                    self._finish(batch, UnknownServerError(f"no answer for {tp}"))
            elif answer.error_code != common_pb2.NONE:
                error = error_for(answer.error_code, answer.error_message or f"producing to {tp}")
                self._on_partitions_error(batches, error, now_ms)
            else:
                base_offset = answer.base_offset
                for batch in batches:
                    self._unresolved.resolved(batch)
                    batch.complete(base_offset, answer.log_append_time_ms)
                    self._accumulator.deallocate(batch)
                    if base_offset >= 0:
                        base_offset += batch.builder.record_count()

    def _on_partitions_error(
        self, batches: list[ProducerBatch], error: KafkaError, now_ms: int
    ) -> None:
        """A partition's batches of one request were refused together, none written. An error
        that would fail them may be one batch's own (a bad record, a batch too large), so
        several batches go again one at a time, and only the batch it is about fails with it.
        Otherwise each batch follows the rules of `_on_partition_error`."""
        if len(batches) > 1 and not error.retriable and not _about_all(error):
            for batch in batches:
                self._accumulator.reenqueue(batch, now_ms, 0)
            return
        for batch in batches:
            self._on_partition_error(batch, error, now_ms)

    def _on_identity(
        self, result: broker_pb2.InitProducerIdResponse | KafkaError, now_ms: int
    ) -> None:
        """A producer id arrived, or the request failed: try again after the backoff (queued
        batches expire by delivery_timeout_ms meanwhile, naming this error)."""
        if isinstance(result, KafkaError):
            self._identity.requesting = False
            self._identity_error = result
            self._identity_retry_at_ms = now_ms + self._config.retry_backoff_ms
            self._metadata.request_update()
            return
        self._identity.adopt(result.producer_id, result.producer_epoch)
        self._identity_error = None

    def _on_partition_error(self, batch: ProducerBatch, error: KafkaError, now_ms: int) -> None:
        if isinstance(error, DuplicateSequenceNumberError):
            self._unresolved.resolved(batch)
            batch.complete(-1, -1)  # written before; the broker no longer knows where
            self._accumulator.deallocate(batch)
            return
        retriable = error.retriable
        backoff_ms = self._config.retry_backoff_ms
        behind = self._unresolved.sent_behind(batch)
        if isinstance(error, OutOfOrderSequenceNumberError):
            # Refused whole because an earlier batch failed or was overtaken, or stamped with
            # an id since given up: it goes again, in order (under the new id, if any), with no
            # backoff of its own: it waits for the batches before it, which back off if needed.
            retriable = behind or batch.producer_id != self._identity.producer_id
            backoff_ms = 0
        if isinstance(error, UnknownProducerIdError):
            # Behind an unresolved batch: it overtook the partition's first batch, which was not
            # written yet (or failed), and goes again in order. Otherwise the brokers forgot
            # this producer (e.g. retention removed its records): a new id, and the batch goes
            # again under it.
            if not behind:
                self._identity.request_reset()
            retriable = True
        if isinstance(error, InvalidMetadataError):
            self._metadata.request_update()
        in_time = now_ms < batch.created_ms + self._config.delivery_timeout_ms
        if retriable and batch.attempts < self._config.retries and in_time:
            self._accumulator.reenqueue(batch, now_ms, backoff_ms)
        elif retriable and not in_time:
            self._finish(batch, self._expired_error(batch, error))
        else:
            self._finish(batch, error)

    def _expired_error(self, batch: ProducerBatch, cause: KafkaError | None = None) -> KafkaError:
        cause = cause or self._identity_error
        count = batch.builder.record_count()
        why = f"; last error: {cause}" if cause else ""
        return RequestTimedOutError(
            f"{count} record(s) for {batch.tp} not delivered within delivery_timeout_ms="
            f"{self._config.delivery_timeout_ms} after {batch.attempts + 1} attempt(s){why}"
        )

    def _finish(self, batch: ProducerBatch, error: KafkaError) -> None:
        """Fails the batch. A failed batch stamped with the current producer id leaves a gap
        (or an unknown outcome) in its partition's sequence: the identity is reset."""
        if batch.producer_id != NO_PRODUCER_ID and batch.producer_id == self._identity.producer_id:
            self._identity.request_reset()
        self._in_flight_batches.discard(batch)
        self._unresolved.resolved(batch)
        if not batch.done:
            batch.fail(error)
        self._accumulator.deallocate(batch)


def _by_partition(batches: list[ProducerBatch]) -> dict[TopicPartition, list[ProducerBatch]]:
    """`batches` per partition, each partition's in request order."""
    grouped: dict[TopicPartition, list[ProducerBatch]] = defaultdict(list)
    for batch in batches:
        grouped[batch.tp].append(batch)
    return grouped


def _about_all(error: KafkaError) -> bool:
    """Whether a refusal is about the producer's sequence and identity, which the pipelining
    rules handle batch by batch, rather than about one batch's records."""
    return isinstance(
        error, (DuplicateSequenceNumberError, OutOfOrderSequenceNumberError, UnknownProducerIdError)
    )
