"""The consumer's background thread: fetches ahead of `poll` and looks up missing positions.

One thread per consumer. A Fetch answer is applied on the thread that receives it (gRPC's
callback: the records reach poll without waiting for this thread, a hop and, under load, a GIL
hand-over), which then wakes this thread to send the next Fetch. Each round it

1. applies the ListOffsets answers that arrived (their callbacks queue them and wake the thread);
2. refreshes metadata if an error asked for it (ClusterMetadata backs off);
3. reports partitions whose topic the metadata now says is deleted;
4. sends ListOffsets for partitions waiting for a reset (auto_offset_reset, seek_to_*);
5. sends a Fetch to each broker that has none in flight, for the partitions that have
   a position, are neither paused, nor already being fetched, nor backing off, nor holding an
   error for the user, sized to what the buffer has room for. A partition is fetched from its
   leader, or from the replica the leader named for the consumer's `client_rack`
   (`read_replica`, KIP-392).

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
from pykraft.client.consumer.read_replica import fetch_address, on_named
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
class _Sent:
    """A partition in a request: its state, the generation it was sent under, and what was
    asked: the fetch offset (Fetch) or the timestamp to look up (ListOffsets), and for a Fetch
    the epoch of the last batch fetched and whether it went to a named read replica."""

    state: PartitionState
    generation: int
    at: int
    epoch: int | None = None
    to_read_replica: bool = False


@dataclass(frozen=True, slots=True)
class _Planned:
    """A Fetch to send: its partitions, the bytes it may bring (`bytes_max`, the request's
    max_bytes) and the buffer bytes it reserved."""

    partitions: dict[TopicPartition, _Sent]
    bytes_max: int
    reserved_bytes: int


@dataclass(frozen=True, slots=True)
class _ResetDone:
    partitions: dict[TopicPartition, _Sent]
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
        self._fetching_addresses: set[str] = set()
        # When each broker was last sent a Fetch (one entry per broker address).
        self._last_fetch_ms: dict[str, int] = {}
        # A partition whose answer did not fit the buffer, and its size: nothing is fetched
        # until that much is free, then it goes first (so it cannot be starved).
        self._starved: tuple[PartitionState, int] | None = None
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
            fetches = self._plan_fetches(now_ms)
        for address, sent in resets.items():
            self._send_reset(address, sent)
        for address, planned in fetches.items():
            self._send_fetch(address, planned)
        return max(1, self._retry_delay_ms(now_ms))

    # --- planning (lock held) ---

    def _plan_resets(self, now_ms: int) -> dict[str, dict[TopicPartition, _Sent]]:
        by_address: dict[str, dict[TopicPartition, _Sent]] = defaultdict(dict)
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
            by_address[leader.address][tp] = _Sent(state, state.generation, state.reset_timestamp)
        return by_address

    def _fetchable(self, state: PartitionState, now_ms: int) -> bool:
        return not (
            state.position is None
            or state.paused
            or state.fetch_in_flight
            or state.blocked_by_error
            or now_ms < state.retry_at_ms
        )

    def _plan_fetches(self, now_ms: int) -> dict[str, _Planned]:
        """The Fetch for each leader, each reserving the bytes its answer may bring."""
        subscription = self._subscription
        states = list(subscription.partitions.values())
        need_bytes = 1
        if self._starved is not None:
            starved, need_bytes = self._starved
            if subscription.partitions.get(starved.tp) is not starved or starved.paused:
                self._starved, need_bytes = None, 1
            else:
                states.remove(starved)
                states.insert(0, starved)
        need_bytes = min(need_bytes, subscription.buffer_bytes_max)
        if subscription.free_bytes() < need_bytes:
            if any(self._fetchable(state, now_ms) for state in states):
                self._drop_paused(need_bytes)
            if subscription.free_bytes() < need_bytes:
                return {}
        by_address: dict[str, dict[TopicPartition, _Sent]] = defaultdict(dict)
        for state in states:
            if not self._fetchable(state, now_ms):
                continue
            leader = self._metadata.leader(state.tp)
            if leader is None:
                self._metadata.request_update()
                continue
            address = fetch_address(state, leader, self._metadata, now_ms)
            if address in self._fetching_addresses:
                continue
            by_address[address][state.tp] = _Sent(
                state,
                state.generation,
                state.fetch_offset,
                state.fetch_epoch,
                to_read_replica=state.read_replica is not None,
            )
        planned: dict[str, _Planned] = {}
        # The starved partition's broker first, then the least recently asked: when the buffer
        # has room for some Fetches only, long polls to brokers with nothing new must not keep
        # the others waiting forever.
        starved_tp = None if self._starved is None else self._starved[0].tp
        turns = sorted(
            by_address,
            key=lambda a: (starved_tp not in by_address[a], self._last_fetch_ms.get(a, -1)),
        )
        for address in turns:
            sent = by_address[address]
            free_bytes = subscription.free_bytes()
            if free_bytes <= 0:
                break
            # What the answer can bring: each partition its share, the request fetch_max_bytes
            # (the first batch excepted, which `fits` deals with).
            partitions_bytes = len(sent) * self._config.max_partition_fetch_bytes
            bytes_max = min(self._config.fetch_max_bytes, partitions_bytes, free_bytes)
            reserved_bytes = bytes_max
            if self._starved is not None and self._starved[0].tp in sent:
                reserved_bytes = max(bytes_max, min(need_bytes, free_bytes))
                self._starved = None
            for s in sent.values():
                s.state.fetch_in_flight = True
            self._fetching_addresses.add(address)
            self._last_fetch_ms[address] = now_ms
            subscription.reserved_bytes += reserved_bytes
            planned[address] = _Planned(sent, bytes_max, reserved_bytes)
        return planned

    def _drop_paused(self, need_bytes: int) -> None:
        """Frees room held by paused partitions for the partitions being read: their data
        is fetched again after `resume` (their positions do not move)."""
        subscription = self._subscription
        for state in subscription.partitions.values():
            if subscription.free_bytes() >= need_bytes:
                return
            if state.paused and state.fetches and not state.blocked_by_error:
                assert state.position is not None, "only a partition with a position fetches"
                subscription.invalidate(state)
                state.fetch_offset, state.fetch_epoch = state.position, state.position_epoch

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

    def _send_fetch(self, address: str, planned: _Planned) -> None:
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
        self, address: str, planned: _Planned, result: broker_pb2.FetchResponse | KafkaError
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

    def _send_reset(self, address: str, sent: dict[TopicPartition, _Sent]) -> None:
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
        planned: _Planned,
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
            self._fetching_addresses.discard(address)
            subscription.reserved_bytes -= planned.reserved_bytes
            for tp, sent in planned.partitions.items():
                sent.state.fetch_in_flight = False
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
            if self._starved is None or self._starved[1] < fetch.size_bytes:
                self._starved = (state, fetch.size_bytes)
            return  # dropped: fetched again, first, once there is room
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
