"""The application-thread half of a consumer's group: subscribe, reconcile to the assignment
the coordinator sends (KIP-848), commit (automatically and on request), leave.

Everything here runs on the application's thread, inside the consumer's poll (or iteration),
commit, unsubscribe and close, so the rebalance listener it calls runs there too; the
heartbeat thread (membership.Membership) only hands targets over. `step`, at the start of each
poll, does in this order:

1. Runs the callbacks of finished `commit_async` calls.
2. Raises a fatal group error (UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, ...), every poll
   until the consumer subscribes again.
3. Lost partitions (the member was fenced, or left after max_poll_interval_ms without poll):
   `on_partitions_lost(owned)`, then drops them without committing (another member may own
   them already) and rejoins with epoch 0 and the same member id.
4. A new target assignment, incrementally: the partitions to revoke first (with auto commit
   their positions are committed synchronously, bounded by default_api_timeout_ms, a failure
   logged; then `on_partitions_revoked`; then they are dropped with their buffered records and
   the coordinator is told at once); then the partitions to add (their committed offsets
   looked up with OffsetFetch; none: reset by auto_offset_reset; then
   `on_partitions_assigned(added)` and the coordinator is told). Partitions kept are never
   touched: their positions, buffered records, fetches in flight and pause stay.
5. Auto commit, every auto_commit_interval_ms: `commit_async` of the positions of every owned
   partition, i.e. past the records poll has handed out (never past what it buffered), at most
   one auto commit in flight.

A listener's exception does not stop the step: the change completes, then `step` raises the
first one.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable

from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.clock import monotonic_ms
from pykraft.client.cluster_metadata import ClusterMetadata
from pykraft.client.consumer.commits import CommitCallback, OffsetCommitter, Offsets, PendingCommit
from pykraft.client.consumer.config import ConsumerConfig
from pykraft.client.consumer.fetcher import Fetcher
from pykraft.client.consumer.listener import ConsumerRebalanceListener
from pykraft.client.consumer.membership import Membership
from pykraft.client.consumer.subscription import (
    RESET_TIMESTAMPS,
    PartitionState,
    SubscriptionState,
)
from pykraft.client.errors import KafkaError
from pykraft.client.group_coordinator import CoordinatorClient
from pykraft.client.types import OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

# How long stopping waits for the heartbeat thread (it wakes at once; a call in flight is
# cancelled when the connection pool closes right after).
_STOP_JOIN_MS_MAX = 5000


class ConsumerGroup:
    """One consumer's group work on the application thread; see the module docstring."""

    def __init__(
        self,
        config: ConsumerConfig,
        subscription: SubscriptionState,
        metadata: ClusterMetadata,
        pool: ConnectionPool,
        fetcher: Fetcher,
    ) -> None:
        assert config.group_id is not None
        self.group_id = config.group_id
        self._config = config
        self._subscription = subscription
        self._metadata = metadata
        self._fetcher = fetcher
        coordinator = CoordinatorClient(
            metadata,
            pool,
            request_timeout_ms=config.request_timeout_ms,
            retry_backoff_ms=config.retry_backoff_ms,
        )
        self.membership = Membership(config, coordinator, functools.partial(_wake, subscription))
        self.committer = OffsetCommitter(
            coordinator,
            config.group_id,
            self.membership,
            request_timeout_ms=config.request_timeout_ms,
            retry_backoff_ms=config.retry_backoff_ms,
        )
        self.subscribed = False
        self._listener = ConsumerRebalanceListener()
        self._auto_commit_due_ms = monotonic_ms() + config.auto_commit_interval_ms
        self._auto_commit: PendingCommit | None = None

    # --- subscription ---

    def subscribe(
        self,
        topics: tuple[str, ...],
        pattern: str | None,
        listener: ConsumerRebalanceListener | None,
    ) -> list[Exception]:
        """Joins, or changes the subscription. After a fatal error the partitions still held
        are lost first (the old listener is told). Returns the listener's exceptions."""
        errors: list[Exception] = []
        if self.subscribed and self.membership.fatal_error() is not None:
            owned = self._owned()
            if owned:
                self._call(self._listener.on_partitions_lost, owned, errors)
                self._drop(owned)
            self.membership.released()
        self._listener = listener if listener is not None else ConsumerRebalanceListener()
        self.subscribed = True
        self.membership.subscribe(topics, pattern)
        return errors

    def subscription(self) -> set[str]:
        """The topics subscribed to by name; with a pattern, those of the owned partitions
        (the coordinator resolves the pattern)."""
        topics, pattern = self.membership.subscription()
        if pattern is None:
            return set(topics)
        with self._subscription.lock:
            return {tp.topic for tp in self._subscription.partitions}

    def leave(self, timeout_ms: int) -> list[Exception]:
        """Gives the partitions up (committing them with auto commit, then
        `on_partitions_revoked`; or `on_partitions_lost` when already fenced), leaves the
        group and forgets the subscription. Returns the listener's exceptions."""
        errors: list[Exception] = []
        if not self.subscribed:
            return errors
        deadline_ms = monotonic_ms() + timeout_ms
        owned = self._owned()
        if self.membership.must_release():
            if owned:
                self._call(self._listener.on_partitions_lost, owned, errors)
        elif owned:
            if self._config.enable_auto_commit:
                self._commit_quietly(self.positions(owned), timeout_ms)
            self._call(self._listener.on_partitions_revoked, owned, errors)
        self._drop(owned)
        self.membership.leave(max(1, deadline_ms - monotonic_ms()))
        self.subscribed = False
        self._listener = ConsumerRebalanceListener()
        return errors

    # --- poll ---

    def poll_started(self, now_ms: int) -> None:
        self.membership.poll_started(now_ms)

    def poll_ended(self, now_ms: int) -> None:
        self.membership.poll_ended(now_ms)

    @property
    def needs_step(self) -> bool:
        return self.subscribed and self.membership.needs_application

    def step(self, now_ms: int) -> None:
        """poll's group work; see the module docstring."""
        self.committer.run_callbacks()
        errors: list[Exception] = []
        if self.subscribed:
            fatal = self.membership.fatal_error()
            if fatal is not None:
                raise fatal.with_traceback(None)  # the same error each poll, not a longer one
            if self.membership.must_release():
                self._release_lost(errors)
            target = self.membership.take_target()
            if target is not None:
                self._reconcile(target, errors)
        self._maybe_auto_commit(now_ms)
        if errors:
            raise errors[0]

    def _release_lost(self, errors: list[Exception]) -> None:
        owned = self._owned()
        if owned:
            self._call(self._listener.on_partitions_lost, owned, errors)
            self._drop(owned)
        self.membership.released()

    def _reconcile(self, target: frozenset[TopicPartition], errors: list[Exception]) -> None:
        owned = self._owned()
        revoked = owned - target
        if revoked:
            if self._config.enable_auto_commit:
                self._commit_quietly(self.positions(revoked), self._config.default_api_timeout_ms)
            self._call(self._listener.on_partitions_revoked, revoked, errors)
            self._drop(revoked)
            owned -= revoked
            self.membership.reconciled(owned)
        added = set(target - owned)
        if not added:
            if revoked:
                self._call(self._listener.on_partitions_assigned, set(), errors)
            return
        try:
            committed = self.committer.fetch(added, self._config.request_timeout_ms)
        except KafkaError as error:
            self.membership.restore_target(target)  # tried again by the next poll
            if not error.retriable:
                raise
            log.warning(
                "group %s: no committed offsets for %s yet: %s", self.group_id, added, error
            )
            return
        self._add(added, committed)
        self._call(self._listener.on_partitions_assigned, set(added), errors)
        self.membership.reconciled(owned | added)

    def _add(
        self, added: set[TopicPartition], committed: dict[TopicPartition, OffsetAndMetadata | None]
    ) -> None:
        """Owns `added` from their committed offsets (none: to be reset by policy)."""
        reset = RESET_TIMESTAMPS.get(self._config.auto_offset_reset)
        subscription = self._subscription
        with subscription.lock:
            for tp in sorted(added):
                state = PartitionState(tp, reset_timestamp=reset)
                found = committed.get(tp)
                if found is not None:
                    state.position = state.fetch_offset = found.offset
                    # The leader checks the committed epoch on the first Fetch (KIP-320).
                    state.position_epoch = state.fetch_epoch = found.leader_epoch
                subscription.partitions[tp] = state
            subscription.changed()
        self._metadata.add_topics({tp.topic for tp in added})
        self._fetcher.wakeup()

    def _drop(self, partitions: Iterable[TopicPartition]) -> None:
        """Stops owning `partitions`: their buffered records and fetches in flight are
        forgotten."""
        subscription = self._subscription
        with subscription.lock:
            for tp in partitions:
                state = subscription.partitions.pop(tp, None)
                if state is not None:
                    subscription.invalidate(state)
            subscription.changed()
        self._fetcher.wakeup()

    def _owned(self) -> set[TopicPartition]:
        with self._subscription.lock:
            return set(self._subscription.partitions)

    def _call(
        self,
        callback: Callable[[set[TopicPartition]], None],
        partitions: set[TopicPartition],
        errors: list[Exception],
    ) -> None:
        """Runs a listener method, keeping its exception for later (the change goes on)."""
        try:
            callback(set(partitions))
        except Exception as error:
            if errors:
                log.exception("group %s: a rebalance listener failed", self.group_id)
            errors.append(error)

    # --- commits ---

    def positions(self, partitions: Iterable[TopicPartition] | None = None) -> Offsets:
        """The positions of `partitions` (default: every owned one) that have one: past the
        records poll handed out."""
        with self._subscription.lock:
            owned = self._subscription.partitions
            states = owned.values() if partitions is None else [owned.get(tp) for tp in partitions]
            return {
                s.tp: OffsetAndMetadata(s.position, "", s.position_epoch)
                for s in states
                if s is not None and s.position is not None
            }

    def commit(self, offsets: Offsets, timeout_ms: int) -> None:
        try:
            if offsets:
                self.committer.commit_sync(offsets, timeout_ms)
        finally:
            self.committer.run_callbacks()

    def commit_async(self, offsets: Offsets, callback: CommitCallback | None) -> None:
        if offsets or callback is not None:
            self.committer.commit_async(offsets, callback, self._config.default_api_timeout_ms)

    def committed(
        self, partitions: list[TopicPartition], timeout_ms: int
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self.committer.fetch(partitions, timeout_ms)

    def _maybe_auto_commit(self, now_ms: int) -> None:
        if not self._config.enable_auto_commit or now_ms < self._auto_commit_due_ms:
            return
        if self._auto_commit is not None and not self._auto_commit.done.is_set():
            return  # due again as soon as the one in flight ended
        self._auto_commit_due_ms = now_ms + self._config.auto_commit_interval_ms
        offsets = self.positions()
        if offsets:
            self._auto_commit = self.committer.commit_async(
                offsets, self._auto_committed, self._config.request_timeout_ms
            )

    def _auto_committed(self, offsets: Offsets, error: Exception | None) -> None:
        if error is not None:
            log.warning("group %s: auto commit failed: %s", self.group_id, error)

    def _commit_quietly(self, offsets: Offsets, timeout_ms: int) -> None:
        """Kafka's auto commit before revocation and on close: a failure is logged (the
        records since the last commit will be read again by the next owner)."""
        if not offsets:
            return
        try:
            self.committer.commit_sync(offsets, timeout_ms)
        except (KafkaError, RuntimeError) as error:
            log.warning("group %s: committing %s failed: %s", self.group_id, offsets, error)

    # --- lifecycle ---

    def close(self, timeout_ms: int) -> list[Exception]:
        """Leaves (see `leave`) or, with manual assignment, auto commits; waits for the
        commits in flight and runs their callbacks; stops the threads. Bounded by
        `timeout_ms` (each thread's stop by a few seconds more at most). Returns the
        listener's exceptions."""
        deadline_ms = monotonic_ms() + timeout_ms
        try:
            if self.subscribed:
                errors = self.leave(timeout_ms)
            else:
                errors = []
                if self._config.enable_auto_commit:
                    self._commit_quietly(self.positions(), timeout_ms)
            self.committer.wait_for_pending(max(0, deadline_ms - monotonic_ms()))
            self.committer.run_callbacks()
        finally:
            self.stop()
        return errors

    def stop(self) -> None:
        """Stops the heartbeat and commit threads (no leave, no commit)."""
        stop_threads(self.membership, self.committer)

    def stopper(self) -> Callable[[], None]:
        """`stop` without a reference to this object (whose listener may refer to the
        consumer), for the consumer's finalizer."""
        return functools.partial(stop_threads, self.membership, self.committer)


def stop_threads(membership: Membership, committer: OffsetCommitter) -> None:
    membership.stop()
    committer.stop()
    membership.join(_STOP_JOIN_MS_MAX)


def _wake(subscription: SubscriptionState) -> None:
    """Wakes a poll waiting for records: the group has something for it (not user code)."""
    with subscription.lock:
        subscription.changed()
