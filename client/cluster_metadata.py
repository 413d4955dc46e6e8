"""The client's view of the cluster: brokers, and each partition's leader, leader epoch and
in-sync replicas.

Refreshed from BrokerService.Metadata for the topics the client uses, when a caller asks
(`request_update`, after an error that means the view is stale) or when a topic is unknown.
Refreshes after a failure back off from `retry_backoff_ms`, doubling up to
`transport.RETRY_BACKOFF_MAX_MS`, so a dead cluster is not hammered. Thread-safe.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.clock import monotonic_ms
from pykraft.client.errors import (
    KafkaConnectionError,
    KafkaError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    error_for,
)
from pykraft.client.transport import Backoff
from pykraft.client.types import TopicPartition
from pykraft.proto import broker_pb2, common_pb2


@dataclass(frozen=True, slots=True)
class PartitionLeader:
    """Who leads a partition, in which epoch, where to reach it, and its in-sync replicas."""

    leader_id: int
    leader_epoch: int
    address: str
    isr: tuple[int, ...] = ()


class ClusterMetadata:
    """Brokers and partition leaders for the topics added with `add_topics`."""

    def __init__(
        self,
        bootstrap: list[str],
        pool: ConnectionPool,
        *,
        request_timeout_ms: int,
        retry_backoff_ms: int,
    ) -> None:
        assert bootstrap
        self._bootstrap = list(bootstrap)
        self._pool = pool
        self._request_timeout_ms = request_timeout_ms
        self._topics: set[str] = set()
        self._brokers: dict[int, str] = {}
        self._leaders: dict[TopicPartition, PartitionLeader | None] = {}
        self._partition_counts: dict[str, int] = {}
        # The partition counts of the followed topics (added with `add_topics`) the cluster
        # named: read without locking (one dict read, atomic in CPython) by the producer's
        # per-record path, changed only under the lock. A topic missing: use wait_for_topic.
        self.known_partition_counts: dict[str, int] = {}
        self._topic_errors: dict[str, KafkaError] = {}
        self._update_requested = False
        self._any_broker_turn = -1
        self._last_refresh_ms = -(1 << 62)
        self._backoff = Backoff(retry_backoff_ms)
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()

    def add_topics(self, topics: Iterable[str]) -> None:
        with self._lock:
            new = set(topics) - self._topics
            self._topics |= new
            self._update_requested |= bool(new)

    def request_update(self) -> None:
        """The view is stale: the next `maybe_refresh` fetches it again."""
        with self._lock:
            self._update_requested = True

    def partition_count(self, topic: str) -> int | None:
        with self._lock:
            return self._partition_counts.get(topic)

    def leader(self, tp: TopicPartition) -> PartitionLeader | None:
        """The partition's leader, or None while it has none or the topic is unknown."""
        with self._lock:
            return self._leaders.get(tp)

    def in_sync_replica_address(self, tp: TopicPartition, broker_id: int) -> str | None:
        """Where to reach `broker_id` if the view has it alive (unfenced) and in `tp`'s ISR;
        None otherwise."""
        with self._lock:
            leader = self._leaders.get(tp)
            if leader is None or broker_id not in leader.isr:
                return None
            return self._brokers.get(broker_id)

    def any_broker_address(self) -> str:
        """A broker to ask something any broker answers (InitProducerId): a known live one,
        else a bootstrap address, turning through them on each call."""
        with self._lock:
            addresses = list(self._brokers.values()) or self._bootstrap
            self._any_broker_turn += 1
            return addresses[self._any_broker_turn % len(addresses)]

    def topic_error(self, topic: str) -> KafkaError | None:
        with self._lock:
            return self._topic_errors.get(topic)

    def maybe_refresh(self, now_ms: int) -> None:
        """Refreshes if an update was requested and the backoff since the last attempt passed;
        a failure is kept for later (the next attempt backs off longer)."""
        with self._lock:
            due = (
                self._update_requested
                and now_ms - self._last_refresh_ms >= self._backoff.current_ms
            )
        if due:
            with contextlib.suppress(KafkaError):
                self.refresh(now_ms)

    def refresh(self, now_ms: int) -> None:
        """Asks the known brokers, then the bootstrap addresses, until one answers."""
        with self._refresh_lock:
            with self._lock:
                self._last_refresh_ms = now_ms
                topics = sorted(self._topics)
                addresses = list(dict.fromkeys([*self._brokers.values(), *self._bootstrap]))
            error: KafkaError = KafkaConnectionError("no broker address to ask")
            for address in addresses:
                try:
                    response = self._pool.get(address).call(
                        "Metadata",
                        broker_pb2.MetadataRequest(topics=topics),
                        broker_pb2.MetadataResponse,
                        self._request_timeout_ms,
                    )
                except KafkaError as e:
                    error = e
                    continue
                self._apply(response)
                return
            with self._lock:
                self._backoff.next_ms()
            raise error

    def _apply(self, response: broker_pb2.MetadataResponse) -> None:
        brokers = {b.id: f"{b.host}:{b.port}" for b in response.brokers}
        # Where each broker takes Produce and Fetch frames (data_port 0: it has no listener).
        self._pool.set_data_addresses(
            {
                brokers[b.id]: f"{b.host}:{b.data_port}" if b.data_port else None
                for b in response.brokers
            }
        )
        with self._lock:
            self._brokers = brokers
            self._update_requested = False
            self._backoff.reset()
            for topic in response.topics:
                self._apply_topic(topic, brokers)

    def _apply_topic(self, topic: broker_pb2.TopicMetadata, brokers: dict[int, str]) -> None:
        name = topic.name
        if topic.error_code != common_pb2.NONE:
            self._topic_errors[name] = error_for(topic.error_code, topic.error_message or name)
            self._partition_counts.pop(name, None)
            self.known_partition_counts.pop(name, None)
            for tp in [tp for tp in self._leaders if tp.topic == name]:
                del self._leaders[tp]
            return
        self._topic_errors.pop(name, None)
        self._partition_counts[name] = len(topic.partitions)
        if name in self._topics:
            self.known_partition_counts[name] = len(topic.partitions)
        for p in topic.partitions:
            tp = TopicPartition(name, p.partition)
            address = brokers.get(p.leader_id)
            has_leader = p.error_code == common_pb2.NONE and address is not None
            if not has_leader:
                self._update_requested = True
            self._leaders[tp] = (
                PartitionLeader(p.leader_id, p.leader_epoch, address, tuple(p.isr))
                if has_leader and address is not None
                else None
            )

    def wait_for_topic(self, topic: str, timeout_ms: int) -> int:
        """The topic's partition count, refreshing until it is known or `timeout_ms` passes.

        Raises the topic's error if it is not retriable (e.g. INVALID_TOPIC_EXCEPTION), else,
        on timeout, UnknownTopicOrPartitionError or the last connection error.
        """
        self.add_topics([topic])
        deadline_ms = monotonic_ms() + timeout_ms
        last_error: KafkaError | None = None
        while True:
            count = self.partition_count(topic)
            if count is not None:
                return count
            error = self.topic_error(topic)
            if error is not None and not error.retriable:
                raise error
            now_ms = monotonic_ms()
            if now_ms >= deadline_ms:
                if error is None and last_error is None:
                    raise RequestTimedOutError(f"no metadata for {topic!r} in {timeout_ms} ms")
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} not in the cluster's metadata after {timeout_ms} ms "
                    f"({error or last_error})"
                )
            try:
                self.refresh(now_ms)
            except KafkaError as e:
                last_error = e
            if self.partition_count(topic) is None:
                wait_ms = self._backoff.current_ms
                time.sleep(min(wait_ms, max(deadline_ms - monotonic_ms(), 0)) / 1000)
