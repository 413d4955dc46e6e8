"""The consumer's background thread: fetches ahead of `poll` and looks up missing positions.

One thread per consumer. A Fetch answer is applied on the thread that receives it (gRPC's
callback: the records reach poll without waiting for this thread, a hop and, under load, a GIL
hand-over), which then wakes this thread to send the next Fetch. Each round it

1. applies the ListOffsets answers that arrived (their callbacks queue them and wake the thread);
2. refreshes metadata if an error asked for it (ClusterMetadata backs off);
3. reports partitions whose topic the metadata now says is deleted;
4. sends ListOffsets for partitions waiting for a reset (auto_offset_reset, seek_to_*);
5. sends a Fetch to each broker that has none in flight, for the partitions that may be
   fetched, sized to what the buffer has room for (`fetch_plan`).

So there is at most one Fetch in flight per broker, and a partition is in at most one; a
partition sought while its Fetch waits on the broker is fetched again once that Fetch answers
(within fetch_max_wait_ms), as in Kafka's consumer.
Answers become `CompletedFetch`es in their partition's queue, still raw bytes; the consumer's
thread decodes them. Errors, as Kafka's consumer treats them:

- NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, other stale-metadata
  codes and unreachable brokers: refresh metadata, retry after retry_backoff_ms; never raised.
- UNKNOWN_TOPIC_OR_PARTITION: the same; once the metadata confirms that a topic it knew is
  gone (deleted, or the partition no longer exists), an UnknownTopicOrPartitionError naming
  it is queued for poll to raise, once per deletion. A topic that never existed is waited for
  quietly, as Kafka's consumer does for an assignment.
- OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE and every non-retriable error: queued after the data
  fetched before it, for poll to handle (reset by policy) or raise.
- Any error from a named read replica (or no answer): back to the leader after
  retry_backoff_ms, the position kept (`read_replica`); never raised, never a reset.
- A `diverging_epoch` answer (the leader's log parts from what was fetched: truncated by an
  unclean election; each Fetch sends the epoch of the last batch fetched) is queued the same
  way, and the consumer's thread settles it before handing out more (see `truncation`).
- Other retriable errors: retried after retry_backoff_ms.

`close` returns once the thread has stopped or `join_ms` passed; in-flight requests are left
to the connection pool, whose closing cancels them.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Final

from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.clock import monotonic_ms
from pykraft.client.cluster_metadata import ClusterMetadata
from pykraft.client.consumer.config import ConsumerConfig
from pykraft.client.consumer.fetch_buffer import CompletedFetch
from pykraft.client.consumer.fetch_plan import FetchPlanner, Planned, Sent
from pykraft.client.consumer.read_replica import on_named
from pykraft.client.consumer.subscription import PartitionState, SubscriptionState
from pykraft.client.errors import (
    CorruptMessageError,
    KafkaConnectionError,
    KafkaError,
    UnknownTopicOrPartitionError,
    error_for,
)
from pykraft.client.offsets import (
    CONSUMER_REPLICA_ID,
    list_offsets_request,
    list_offsets_results,
    wants_metadata,
)
from pykraft.client.types import ListOffsetsResult, TopicPartition
from pykraft.proto import broker_pb2, common_pb2

# With nothing to retry the thread sleeps until woken, but never longer than this.
_IDLE_WAIT_MS_MAX: Final = 1000


@dataclass(frozen=True, slots=True)
class _ResetDone:
    partitions: dict[TopicPartition, Sent]
    result: broker_pb2.ListOffsetsResponse | KafkaError


class Fetcher:
    """Owns the fetcher thread; `start` once, `close` once."""

    def __init__(
        self,
        subscription: SubscriptionState,
        metadata: ClusterMetadata,
        pool: ConnectionPool,
        config: ConsumerConfig,
    ) -> None:
        self._subscription = subscription
        self._metadata = metadata
        self._pool = pool
        self._config = config
        self._wakeup = threading.Event()
        self._completions: queue.SimpleQueue[_ResetDone] = queue.SimpleQueue()
        self._plan = FetchPlanner(subscription, metadata, config)
        self._running = True
        self._thread = threading.Thread(target=self._run, name="pykraft-consumer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wakeup(self) -> None:
        """Something changed (assignment, position, pause, room in the buffer): look again."""
        self._wakeup.set()

    def stop(self) -> None:
        """Asks the thread to stop at its next step; `join` waits for it."""
        self._running = False
        self._wakeup.set()

    def join(self, timeout_ms: int) -> bool:
        """Waits up to `timeout_ms` for the thread to end; whether it did."""
        self._thread.join(timeout_ms / 1000)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            while self._running:
                self._wakeup.clear()
                delay_ms = self._run_once(monotonic_ms())
                if self._running:
                    self._wakeup.wait(delay_ms / 1000)
        except BaseException as e:  # closing races (a closed pool) end it quietly
            if self._running:
                self._fail(e)
                raise

    def _fail(self, error: BaseException) -> None:
        """A bug broke the fetching: poll raises it."""
        subscription = self._subscription
        with subscription.lock:
            subscription.fatal_error = error
            subscription.changed()

    def _run_once(self, now_ms: int) -> int:
        """One round; returns how long (ms) nothing needs doing unless woken."""
        while not self._completions.empty():
            self._on_reset(self._completions.get(), now_ms)
        self._metadata.maybe_refresh(now_ms)
        with self._subscription.lock:
            self._check_deleted_topics()
            resets = self._plan_resets(now_ms)
            fetches = self._plan.plan(now_ms)
        for address, sent in resets.items():
            self._send_reset(address, sent)
        for address, planned in fetches.items():
            self._send_fetch(address, planned)
        return max(1, self._retry_delay_ms(now_ms))

    # --- planning (lock held) ---

    def _plan_resets(self, now_ms: int) -> dict[str, dict[TopicPartition, Sent]]:
        by_address: dict[str, dict[TopicPartition, Sent]] = defaultdict(dict)
        for tp, state in self._subscription.partitions.items():
            if (
                state.position is not None
                or state.reset_timestamp is None
                or state.reset_in_flight
                or state.blocked_by_error
                or now_ms < state.retry_at_ms
            ):
                continue
            leader = self._metadata.leader(tp)
            if leader is None:
                self._metadata.request_update()
                continue
            state.reset_in_flight = True
            by_address[leader.address][tp] = Sent(state, state.generation, state.reset_timestamp)
        return by_address

    def _check_deleted_topics(self) -> None:
        """Queues UnknownTopicOrPartitionError for partitions whose topic the metadata knew
        and now says is gone; call with the lock held."""
        for tp, state in self._subscription.partitions.items():
            if self._metadata.leader(tp) is not None:
                state.topic_seen, state.gone_reported = True, False
                continue
            if not state.topic_seen or state.gone_reported or state.blocked_by_error:
                continue
            gone = self._gone_reason(tp)
            if gone is not None:
                state.gone_reported = True
                error = UnknownTopicOrPartitionError(gone)
                self._subscription.append(state, CompletedFetch.failed(tp, -1, error))

    def _gone_reason(self, tp: TopicPartition) -> str | None:
        """Why the metadata says `tp` no longer exists, or None if it does not say so."""
        if isinstance(self._metadata.topic_error(tp.topic), UnknownTopicOrPartitionError):
            return f"topic {tp.topic!r} no longer exists (it was deleted?): unassign {tp}"
        count = self._metadata.partition_count(tp.topic)
        if count is not None and tp.partition >= count:
            return f"topic {tp.topic!r} has {count} partitions now, no {tp}: unassign it"
        return None

    def _retry_delay_ms(self, now_ms: int) -> int:
        """Until the next partition's backoff ends, or retry_backoff_ms while one waits for
        a leader; _IDLE_WAIT_MS_MAX when nothing waits."""
        delay_ms = _IDLE_WAIT_MS_MAX
        with self._subscription.lock:
            for state in self._subscription.partitions.values():
                if state.fetch_in_flight or state.reset_in_flight or state.paused:
                    continue
                if state.retry_at_ms > now_ms:
                    delay_ms = min(delay_ms, state.retry_at_ms - now_ms)
                elif self._metadata.leader(state.tp) is None:
                    delay_ms = min(delay_ms, self._config.retry_backoff_ms)
        return delay_ms

    # --- sending ---

    def _send_fetch(self, address: str, planned: Planned) -> None:
        bytes_max = planned.bytes_max
        topics: dict[str, list[broker_pb2.FetchPartition]] = defaultdict(list)
        for tp, s in planned.partitions.items():
            leader = self._metadata.leader(tp)
            topics[tp.topic].append(
                broker_pb2.FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=-1 if leader is None else leader.leader_epoch,
                    fetch_offset=s.at,
                    last_fetched_epoch=-1 if s.epoch is None or s.epoch < 0 else s.epoch,
                    log_start_offset=-1,
                    partition_max_bytes=min(self._config.max_partition_fetch_bytes, bytes_max),
                )
            )
        request = broker_pb2.FetchRequest(
            replica_id=CONSUMER_REPLICA_ID,
            replica_epoch=-1,
            max_wait_ms=self._config.fetch_max_wait_ms,
            min_bytes=self._config.fetch_min_bytes,
            max_bytes=bytes_max,
            isolation_level=self._config.isolation_level_id,
            topics=[broker_pb2.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
            rack_id=self._config.client_rack or None,
        )
        self._pool.get(address).call_async(
            "Fetch",
            request,
            broker_pb2.FetchResponse,
            self._config.fetch_max_wait_ms + self._config.request_timeout_ms,
            functools.partial(self._fetch_done, address, planned),
        )

    def _fetch_done(
        self, address: str, planned: Planned, result: broker_pb2.FetchResponse | KafkaError
    ) -> None:
        """On the thread that received the answer: applies it (under the subscription's lock,
        as everything that plans or answers Fetches), then wakes the fetcher thread. Answers
        that arrive once the consumer is closing (cancelled calls) are dropped."""
        if not self._running:
            return
        try:
            self._on_fetch(address, planned, result, monotonic_ms())
        except BaseException as e:
            self._fail(e)
            raise
        finally:
            self._wakeup.set()

    def _send_reset(self, address: str, sent: dict[TopicPartition, Sent]) -> None:
        wanted: dict[TopicPartition, tuple[int, int]] = {}
        for tp, s in sent.items():
            leader = self._metadata.leader(tp)
            wanted[tp] = (s.at, -1 if leader is None else leader.leader_epoch)

        def done(result: broker_pb2.ListOffsetsResponse | KafkaError) -> None:
            self._completions.put(_ResetDone(sent, result))
            self._wakeup.set()

        self._pool.get(address).call_async(
            "ListOffsets",
            list_offsets_request(wanted, self._config.isolation_level_id),
            broker_pb2.ListOffsetsResponse,
            self._config.request_timeout_ms,
            done,
        )

    # --- answers ---

    def _on_fetch(
        self,
        address: str,
        planned: Planned,
        result: broker_pb2.FetchResponse | KafkaError,
        now_ms: int,
    ) -> None:
        subscription = self._subscription
        answers: dict[TopicPartition, broker_pb2.FetchPartitionResult] = {}
        if not isinstance(result, KafkaError):
            for topic in result.topics:
                for p in topic.partitions:
                    answers[TopicPartition(topic.topic, p.partition)] = p
        with subscription.lock:
            self._plan.answered(address, planned)
            for tp, sent in planned.partitions.items():
                if not subscription.current(sent.state, sent.generation):
                    continue  # sought, reset or unassigned meanwhile: a stale answer
                if sent.state.fetch_offset != sent.at:
                    continue
                answer = answers.get(tp)
                if isinstance(result, KafkaError) or answer is None:
                    error = (
                        result
                        if isinstance(result, KafkaError)
                        else KafkaConnectionError(f"{address} did not answer for {tp}")
                    )
                    self._retry(sent.state, error, now_ms)
                elif answer.error_code != common_pb2.NONE:
                    message = answer.error_message or f"fetching {tp} at offset {sent.at}"
                    error = error_for(answer.error_code, message)
                    if sent.to_read_replica:
                        self._retry(sent.state, error, now_ms)  # the leader's turn again
                    else:
                        self._on_error(sent.state, error, now_ms)
                elif answer.HasField("preferred_read_replica"):
                    on_named(
                        sent.state,
                        answer.preferred_read_replica,
                        self._metadata,
                        now_ms=now_ms,
                        lease_ms=self._config.metadata_max_age_ms,
                        retry_backoff_ms=self._config.retry_backoff_ms,
                    )
                elif answer.HasField("diverging_epoch"):
                    diverging = answer.diverging_epoch
                    fetch = CompletedFetch.diverged(
                        tp, sent.at, diverging.epoch, diverging.end_offset
                    )
                    subscription.append(sent.state, fetch)
                else:
                    self._on_records(sent.state, answer.records, now_ms)

    def _on_records(self, state: PartitionState, data: bytes, now_ms: int) -> None:
        subscription = self._subscription
        try:
            fetch = CompletedFetch.of_records(
                state.tp, state.fetch_offset, data, check_crcs=self._config.check_crcs
            )
        except KafkaError as e:
            subscription.append(state, CompletedFetch.failed(state.tp, state.fetch_offset, e))
            return
        if fetch is None:
            if data:  # bytes, yet no whole batch: do not spin on it
                state.retry_at_ms = now_ms + self._config.retry_backoff_ms
            return
        if not subscription.fits(fetch.size_bytes):
            self._plan.starve(state, fetch.size_bytes)
            return
        state.fetch_offset, state.fetch_epoch = fetch.next_offset, fetch.last_epoch
        subscription.append(state, fetch)

    def _on_error(self, state: PartitionState, error: KafkaError, now_ms: int) -> None:
        if isinstance(error, CorruptMessageError) or not error.retriable:
            self._subscription.append(
                state, CompletedFetch.failed(state.tp, state.fetch_offset, error)
            )
        else:
            self._retry(state, error, now_ms)

    def _retry(self, state: PartitionState, error: KafkaError, now_ms: int) -> None:
        """Fetches `state` again after retry_backoff_ms, from its leader (a named read replica
        is forgotten after any failure, as Kafka's consumer does)."""
        state.read_replica = None
        if wants_metadata(error):
            self._metadata.request_update()
        state.retry_at_ms = now_ms + self._config.retry_backoff_ms

    def _on_reset(self, done: _ResetDone, now_ms: int) -> None:
        subscription = self._subscription
        results = {} if isinstance(done.result, KafkaError) else list_offsets_results(done.result)
        with subscription.lock:
            for tp, sent in done.partitions.items():
                state = sent.state
                state.reset_in_flight = False
                if not subscription.current(state, sent.generation) or state.position is not None:
                    continue
                result = (
                    done.result
                    if isinstance(done.result, KafkaError)
                    else results.get(tp, KafkaConnectionError(f"no offset answer for {tp}"))
                )
                if isinstance(result, ListOffsetsResult):
                    state.position = state.fetch_offset = result.offset
                    state.reset_timestamp = None
                    subscription.changed()
                elif result.retriable:
                    self._retry(state, result, now_ms)
                else:
                    subscription.append(state, CompletedFetch.failed(tp, -1, result))
