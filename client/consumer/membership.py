"""A subscribed consumer's membership in its group (KIP-848): the member id and epoch, the
subscription, the partitions the consumer owns, the assignment the coordinator wants it to own,
and the heartbeat thread that tells the coordinator the one and learns the other.

Two threads, one lock (`_lock`):

- The heartbeat thread sends ConsumerGroupHeartbeat, every time in full (subscription, owned
  partitions, rebalance timeout, ...), when `heartbeat_interval_ms` has passed since the last
  answer, or at once when the application changed what it owns or subscribes to. It records
  what the answers say (epoch, interval, a new target assignment, fencing, fatal errors) and
  wakes the application thread; it never calls user code and never touches what the consumer
  reads. It also leaves the group when the application stops polling for longer than
  max_poll_interval_ms (Kafka's poll timer).
- The application thread (group.ConsumerGroup, inside poll) takes the target, reconciles to it,
  and reports the new owned set with `reconciled`; after fencing it drops everything and calls
  `released`, which rejoins. `leave` (close, unsubscribe) is sent from the application thread.

The member id is chosen here (uuid4 hex) and kept for the consumer's life, across rejoins.

States, and what moves between them::

    UNSUBSCRIBED --subscribe--> JOINING --first answer--> STABLE
    JOINING, STABLE --FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID--> FENCED --released--> JOINING
    JOINING, STABLE --no poll for max_poll_interval_ms (leave sent)--> STALE --released--> JOINING
    JOINING, STABLE --any other non-retriable error--> FATAL --subscribe--> JOINING
    any --leave--> LEAVING --> UNSUBSCRIBED

Retriable errors (after CoordinatorClient's own retries) are retried with a backoff that doubles
up to `transport.RETRY_BACKOFF_MAX_MS`, in the same state and epoch.
"""

from __future__ import annotations

import enum
import logging
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Final

from pykraft.client.clock import monotonic_ms
from pykraft.client.consumer.config import ConsumerConfig
from pykraft.client.errors import (
    FencedMemberEpochError,
    KafkaError,
    UnknownMemberIdError,
)
from pykraft.client.group_coordinator import CoordinatorClient
from pykraft.client.transport import Backoff
from pykraft.client.types import TopicPartition
from pykraft.proto import group_pb2

log = logging.getLogger(__name__)

# member_epoch values with a meaning of their own (KIP-848).
JOIN_EPOCH: Final = 0
LEAVE_EPOCH: Final = -1
LEAVE_STATIC_EPOCH: Final = -2  # a static member leaving for now: its partitions wait for it
# Without a heartbeat due the thread still looks at its state this often.
_IDLE_WAIT_MS_MAX: Final = 1000


class MemberState(enum.Enum):
    UNSUBSCRIBED = "unsubscribed"
    JOINING = "joining"  # epoch 0: the join heartbeat is due or in flight
    STABLE = "stable"  # a member with an epoch (reconciling or not)
    FENCED = "fenced"  # removed by the coordinator: the application must drop its partitions
    STALE = "stale"  # left after max_poll_interval_ms without poll: the same
    FATAL = "fatal"  # a non-retriable error, raised by poll
    LEAVING = "leaving"  # the application is sending the leave heartbeat


_HEARTBEATING: Final = (MemberState.JOINING, MemberState.STABLE)


class Membership:
    """The shared membership state and the heartbeat thread (started by the first
    `subscribe`); see the module docstring for who calls what."""

    def __init__(
        self,
        config: ConsumerConfig,
        coordinator: CoordinatorClient,
        wake_application: Callable[[], None],
    ) -> None:
        assert config.group_id is not None
        self.group_id = config.group_id
        self._config = config
        self._coordinator = coordinator
        self._wake_application = wake_application
        self._lock = threading.Condition()
        self.member_id = uuid.uuid4().hex
        self._state = MemberState.UNSUBSCRIBED
        self._epoch = JOIN_EPOCH
        self._topics: tuple[str, ...] = ()
        self._pattern: str | None = None
        self._owned: frozenset[TopicPartition] = frozenset()
        self._target: frozenset[TopicPartition] | None = None
        self._fatal: KafkaError | None = None
        self._due_ms = 0
        self._send_now = False
        self._in_flight = False
        self._backoff = Backoff(config.retry_backoff_ms)
        self._running = True
        self._thread: threading.Thread | None = None
        # The poll timer, written by the application thread without the lock (a stale read
        # only delays the check by one round).
        self.in_poll = False
        self.last_poll_ms = monotonic_ms()

    # --- the application thread ---

    def subscribe(self, topics: tuple[str, ...], pattern: str | None) -> None:
        """Sets the subscription and joins (or tells the coordinator at once, if a member)."""
        with self._lock:
            self._topics, self._pattern = topics, pattern
            if self._state in (MemberState.UNSUBSCRIBED, MemberState.FATAL):
                self._state, self._epoch, self._fatal = MemberState.JOINING, JOIN_EPOCH, None
                self.last_poll_ms = monotonic_ms()
            self._send_now = True
            self._lock.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="pykraft-heartbeat", daemon=True
                )
                self._thread.start()

    def poll_started(self, now_ms: int) -> None:
        self.in_poll, self.last_poll_ms = True, now_ms

    def poll_ended(self, now_ms: int) -> None:
        self.in_poll, self.last_poll_ms = False, now_ms

    @property
    def needs_application(self) -> bool:
        """Whether poll has something to do: a target, partitions to drop or an error.
        A lock-free read for the iteration's per-record check; `take_target` and the others
        give the exact answer."""
        return self._target is not None or self._state in (
            MemberState.FENCED,
            MemberState.STALE,
            MemberState.FATAL,
        )

    def fatal_error(self) -> KafkaError | None:
        with self._lock:
            return self._fatal

    def must_release(self) -> bool:
        """Fenced or stale: the partitions are lost; drop them, then call `released`."""
        with self._lock:
            return self._state in (MemberState.FENCED, MemberState.STALE)

    def take_target(self) -> frozenset[TopicPartition] | None:
        """The assignment to reconcile to, once (None: nothing new)."""
        with self._lock:
            target, self._target = self._target, None
            return target

    def restore_target(self, target: frozenset[TopicPartition]) -> None:
        """Puts back a target the application could not reconcile yet (unless a newer one
        came meanwhile), for the next poll to try again."""
        with self._lock:
            if self._target is None and self._state in _HEARTBEATING:
                self._target = target

    def reconciled(self, owned: Iterable[TopicPartition]) -> None:
        """The consumer owns `owned` now: tell the coordinator at once."""
        with self._lock:
            self._owned = frozenset(owned)
            if self._state in _HEARTBEATING:
                self._send_now = True
                self._lock.notify_all()

    def released(self) -> None:
        """After fencing or a poll timeout (or a fatal error), the consumer dropped its
        partitions: rejoin with epoch 0 and the same member id (after a fatal error: once it
        subscribes again)."""
        with self._lock:
            self._owned = frozenset()
            if self._state in (MemberState.FENCED, MemberState.STALE):
                self._state, self._epoch, self._target = MemberState.JOINING, JOIN_EPOCH, None
                self._send_now = True
                self._lock.notify_all()

    def subscription(self) -> tuple[tuple[str, ...], str | None]:
        with self._lock:
            return self._topics, self._pattern

    def leave(self, timeout_ms: int) -> None:
        """Leaves the group (epoch -1, or -2 for a static member) and stops heartbeating;
        waits up to `timeout_ms` for a heartbeat in flight and for the answer. Errors are
        logged, not raised: the coordinator removes the member after its session anyway."""
        deadline_ms = monotonic_ms() + timeout_ms
        with self._lock:
            if self._state is MemberState.UNSUBSCRIBED:
                return
            state, self._state = self._state, MemberState.LEAVING
            while self._in_flight and (left_ms := deadline_ms - monotonic_ms()) > 0:
                self._lock.wait(left_ms / 1000)
            member = state in _HEARTBEATING and self._epoch > 0
            request = self._request(self._leave_epoch()) if member else None
        if request is not None:
            try:
                self._coordinator.call(
                    self.group_id,
                    "ConsumerGroupHeartbeat",
                    request,
                    group_pb2.ConsumerGroupHeartbeatResponse,
                    max(1, deadline_ms - monotonic_ms()),
                )
            except KafkaError as error:
                log.warning("group %s: leaving failed: %s", self.group_id, error)
        with self._lock:
            self._state, self._epoch = MemberState.UNSUBSCRIBED, JOIN_EPOCH
            self._owned, self._target, self._fatal = frozenset(), None, None
            self._topics, self._pattern = (), None
            self._lock.notify_all()

    def stop(self) -> None:
        """Ends the heartbeat thread (without leaving: see `leave`)."""
        with self._lock:
            self._running = False
            self._lock.notify_all()

    def join(self, timeout_ms: int) -> None:
        if self._thread is not None:
            self._thread.join(timeout_ms / 1000)

    # --- what commits need (any thread) ---

    def identity(self) -> tuple[str, int]:
        """(member id, epoch) to commit with; ("", -1) when not a member (manual
        assignment, or not joined yet), which only a group without members accepts."""
        with self._lock:
            if self._state in _HEARTBEATING and self._epoch > 0:
                return self.member_id, self._epoch
            return "", -1

    def owns_all(self, partitions: Iterable[TopicPartition]) -> bool:
        """Whether the consumer still owns every one of `partitions` (always, when it is not
        subscribed: manual assignment owns what it assigns)."""
        with self._lock:
            if self._state is MemberState.UNSUBSCRIBED:
                return True
            return self._owned.issuperset(partitions)

    def wait_for_epoch_change(self, epoch: int, timeout_ms: int) -> None:
        """Waits until the member epoch is no longer `epoch`, or `timeout_ms` passed."""
        deadline_ms = monotonic_ms() + timeout_ms
        with self._lock:
            while self._epoch == epoch and (left_ms := deadline_ms - monotonic_ms()) > 0:
                self._lock.wait(left_ms / 1000)

    # --- the heartbeat thread ---

    def _run(self) -> None:
        try:
            while (request := self._next_request()) is not None:
                try:
                    result: group_pb2.ConsumerGroupHeartbeatResponse | KafkaError = (
                        self._coordinator.call(
                            self.group_id,
                            "ConsumerGroupHeartbeat",
                            request,
                            group_pb2.ConsumerGroupHeartbeatResponse,
                            self._config.request_timeout_ms,
                        )
                    )
                except KafkaError as error:
                    result = error
                self._on_answer(request, result)
        except Exception as error:  # a closed connection pool while stopping ends it quietly
            with self._lock:
                if not self._running:
                    return
                self._state = MemberState.FATAL
                self._fatal = KafkaError(f"the consumer's heartbeat thread failed: {error!r}")
                self._in_flight = False
                self._lock.notify_all()
            self._wake_application()

    def _next_request(self) -> group_pb2.ConsumerGroupHeartbeatRequest | None:
        """Waits until a heartbeat is due (or the poll timer expires, which sends the leave
        heartbeat); None once stopped."""
        with self._lock:
            while self._running:
                now_ms = monotonic_ms()
                wait_ms = _IDLE_WAIT_MS_MAX
                if self._state in _HEARTBEATING:
                    poll_deadline_ms = self.last_poll_ms + self._config.max_poll_interval_ms
                    if not self.in_poll and now_ms >= poll_deadline_ms:
                        return self._poll_timer_expired()
                    if self._send_now or now_ms >= self._due_ms:
                        self._send_now, self._in_flight = False, True
                        return self._request(self._epoch)
                    wait_ms = min(self._due_ms, poll_deadline_ms) - now_ms
                self._lock.wait(max(1, min(wait_ms, _IDLE_WAIT_MS_MAX)) / 1000)
            return None

    def _poll_timer_expired(self) -> group_pb2.ConsumerGroupHeartbeatRequest:
        """Kafka's rule: a consumer that does not poll within max_poll_interval_ms leaves, so
        its partitions go to members that do; the next poll drops them and rejoins. Call with
        the lock held; returns the leave heartbeat to send."""
        log.warning(
            "group %s: no poll for max_poll_interval_ms (%d ms): leaving the group; the next "
            "poll rejoins",
            self.group_id,
            self._config.max_poll_interval_ms,
        )
        request = self._request(self._leave_epoch())
        self._state, self._epoch, self._target = MemberState.STALE, JOIN_EPOCH, None
        self._in_flight = True
        self._lock.notify_all()
        return request

    def _on_answer(
        self,
        request: group_pb2.ConsumerGroupHeartbeatRequest,
        result: group_pb2.ConsumerGroupHeartbeatResponse | KafkaError,
    ) -> None:
        wake = False
        with self._lock:
            self._in_flight = False
            self._lock.notify_all()
            if request.member_epoch < 0:
                return  # the answer to a leave
            if self._state is MemberState.LEAVING:
                if not isinstance(result, KafkaError):
                    self._epoch = result.member_epoch  # joined meanwhile: `leave` must say so
                return
            if self._state not in _HEARTBEATING:
                return
            now_ms = monotonic_ms()
            if isinstance(result, KafkaError):
                wake = self._on_error(result, now_ms)
            else:
                wake = self._on_response(result, now_ms)
        if wake:
            self._wake_application()

    def _on_response(self, response: group_pb2.ConsumerGroupHeartbeatResponse, now_ms: int) -> bool:
        """Records an answer (lock held); whether the application has something to do."""
        self._epoch = response.member_epoch
        self._state = MemberState.STABLE
        self._backoff.reset()
        self._due_ms = now_ms + max(0, response.heartbeat_interval_ms)
        if not response.has_assignment:
            return False
        target = frozenset(
            TopicPartition(t.topic, p) for t in response.assignment for p in t.partitions
        )
        if target == self._owned:
            self._target = None  # the newest word, and nothing to do (a coordinator may
            return False  # send the whole assignment in every answer)
        self._target = target
        return True

    def _on_error(self, error: KafkaError, now_ms: int) -> bool:
        """Records a failed heartbeat (lock held); whether the application must act."""
        if isinstance(error, FencedMemberEpochError | UnknownMemberIdError):
            log.warning("group %s: member fenced (%s): rejoining", self.group_id, error)
            self._state, self._epoch, self._target = MemberState.FENCED, JOIN_EPOCH, None
            return True
        if error.retriable:
            self._due_ms = now_ms + self._backoff.next_ms()
            return False
        self._state, self._fatal, self._target = MemberState.FATAL, error, None
        return True

    def _leave_epoch(self) -> int:
        return LEAVE_EPOCH if self._config.group_instance_id is None else LEAVE_STATIC_EPOCH

    def _request(self, epoch: int) -> group_pb2.ConsumerGroupHeartbeatRequest:
        """The full heartbeat (lock held)."""
        config = self._config
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in sorted(self._owned):
            by_topic[tp.topic].append(tp.partition)
        return group_pb2.ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=config.group_instance_id or "",
            rebalance_timeout_ms=config.max_poll_interval_ms,
            subscribed_topic_names=self._topics,
            subscribed_topic_regex=self._pattern or "",
            server_assignor=config.group_remote_assignor or "",
            owned_partitions=[
                group_pb2.TopicPartitions(topic=topic, partitions=partitions)
                for topic, partitions in by_topic.items()
            ],
            client_id=config.client_id,
        )
