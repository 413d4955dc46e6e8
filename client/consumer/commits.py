"""Committed offsets of a consumer's group: OffsetCommit and OffsetFetch against its coordinator.

Commits, synchronous and asynchronous alike, run one at a time on one thread (started by the
first commit), in the order they were made, so an older commit never lands after a newer one.
`commit_sync` waits for its turn and its answer; `commit_async` returns at once, and its
callback is queued for the application thread, which runs it in `run_callbacks` (called by the
consumer's poll, commit and close: Kafka's rule that commit callbacks run on the thread that
polls). At most `COMMITS_QUEUED_MAX` commits wait; one more blocks until there is room.

A commit carries the member id and epoch the heartbeat thread has at the moment it is sent
("" and -1 when the consumer is not a member: manual assignment). Errors:

- UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH: the member is gone; CommitFailedError.
- STALE_MEMBER_EPOCH: the epoch moved on (a rebalance step): sent again with the newest epoch,
  until the deadline (then CommitFailedError), unless the consumer gave up one of the
  partitions meanwhile (CommitFailedError: the new owner's position is the one that counts).
- Coordinator moves and loading: retried by CoordinatorClient until the deadline.
- A per-partition error (OFFSET_METADATA_TOO_LARGE, UNKNOWN_TOPIC_OR_PARTITION, ...): raised
  for that partition, naming it (the others were committed).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Final, Protocol

from pykraft.client.clock import monotonic_ms
from pykraft.client.errors import (
    CommitFailedError,
    FencedMemberEpochError,
    KafkaError,
    RequestTimedOutError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    error_for,
)
from pykraft.client.group_coordinator import CoordinatorClient
from pykraft.client.group_offsets import (
    commit_request,
    fetch_request,
    fetch_results,
    partition_errors,
)
from pykraft.client.transport import RETRY_BACKOFF_MAX_MS
from pykraft.client.types import OffsetAndMetadata, TopicPartition
from pykraft.proto import common_pb2, group_pb2

log = logging.getLogger(__name__)

COMMITS_QUEUED_MAX: Final = 100
# How long the commit thread may wait for its last job when stopping.
_STOP_JOIN_MS_MAX: Final = 5000

Offsets = dict[TopicPartition, OffsetAndMetadata]
# Kafka's OffsetCommitCallback: the offsets and None, or the exception the commit ended with.
CommitCallback = Callable[[Offsets, Exception | None], None]


class GroupMember(Protocol):
    """What commits need from the membership (membership.Membership)."""

    def identity(self) -> tuple[str, int]: ...

    def owns_all(self, partitions: Iterable[TopicPartition]) -> bool: ...

    def wait_for_epoch_change(self, epoch: int, timeout_ms: int) -> None: ...


@dataclass(eq=False)
class PendingCommit:
    """A commit handed to the commit thread; `done` is set once it ended (`error` None or
    the exception)."""

    offsets: Offsets
    deadline_ms: int
    callback: CommitCallback | None
    done: threading.Event = field(default_factory=threading.Event)
    error: Exception | None = None
    started: bool = False
    cancelled: bool = False


class OffsetCommitter:
    """Commits in order on one thread, and OffsetFetch on the caller's; thread-safe."""

    def __init__(
        self,
        coordinator: CoordinatorClient,
        group_id: str,
        member: GroupMember,
        *,
        request_timeout_ms: int,
        retry_backoff_ms: int,
    ) -> None:
        self._coordinator = coordinator
        self._group_id = group_id
        self._member = member
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._jobs: queue.Queue[PendingCommit | None] = queue.Queue(COMMITS_QUEUED_MAX)
        self._finished: queue.SimpleQueue[PendingCommit] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopped = False

    # --- commits ---

    def commit_sync(self, offsets: Offsets, timeout_ms: int) -> None:
        """Commits `offsets` after the commits made before; raises what the commit ended with,
        or RequestTimedOutError when it could not even start within `timeout_ms`."""
        job = self._submit(offsets, timeout_ms, None)
        job.done.wait(max(0, job.deadline_ms - monotonic_ms()) / 1000)
        with self._lock:
            if not job.started:
                job.cancelled = True
                raise RequestTimedOutError(
                    f"the commit of {_names(offsets)} did not start within {timeout_ms} ms "
                    "(earlier commits still waiting for the coordinator)"
                )
        job.done.wait()  # started before the deadline: it ends by the deadline
        if job.error is not None:
            raise job.error

    def commit_async(
        self, offsets: Offsets, callback: CommitCallback | None, timeout_ms: int
    ) -> PendingCommit:
        """Queues a commit; `callback` runs in a later `run_callbacks`."""
        return self._submit(offsets, timeout_ms, callback)

    def run_callbacks(self) -> None:
        """Runs the callbacks of finished async commits, in order, on the calling thread.
        A callback's exception is logged, not raised (Kafka's consumer does the same)."""
        while True:
            try:
                job = self._finished.get_nowait()
            except queue.Empty:
                return
            assert job.callback is not None
            try:
                job.callback(job.offsets, job.error)
            except Exception:
                log.exception("group %s: an offset commit callback failed", self._group_id)

    def wait_for_pending(self, timeout_ms: int) -> None:
        """Waits (up to `timeout_ms`) until the commits queued so far have ended."""
        with self._lock:
            if self._thread is None:
                return
        try:
            marker = self._submit({}, timeout_ms, None)
        except RequestTimedOutError:
            return
        marker.done.wait(timeout_ms / 1000)

    def _submit(
        self, offsets: Offsets, timeout_ms: int, callback: CommitCallback | None
    ) -> PendingCommit:
        job = PendingCommit(dict(offsets), monotonic_ms() + timeout_ms, callback)
        with self._lock:
            if self._stopped:
                raise RuntimeError("the consumer is closed")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="pykraft-commits", daemon=True
                )
                self._thread.start()
        try:
            self._jobs.put(job, timeout=max(0, timeout_ms) / 1000)
        except queue.Full:
            raise RequestTimedOutError(
                f"{COMMITS_QUEUED_MAX} commits still wait for the coordinator; "
                f"no room for another within {timeout_ms} ms"
            ) from None
        return job

    def stop(self) -> None:
        """Ends the commit thread after the commits queued so far (bounded by their
        deadlines); later commits raise."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            thread = self._thread
        if thread is not None:
            try:
                self._jobs.put(None, timeout=_STOP_JOIN_MS_MAX / 1000)
            except queue.Full:
                return  # the thread is a daemon, stuck on a coordinator; let it be
            thread.join(_STOP_JOIN_MS_MAX / 1000)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            with self._lock:
                if job.cancelled:
                    continue
                job.started = True
            try:
                if job.offsets:
                    self._commit(job.offsets, job.deadline_ms)
            except Exception as error:  # handed to the caller, whatever it is
                job.error = error
            job.done.set()
            if job.callback is not None:
                self._finished.put(job)

    def _commit(self, offsets: Offsets, deadline_ms: int) -> None:
        """One commit with the retries of the module docstring."""
        while True:
            member_id, epoch = self._member.identity()
            left_ms = deadline_ms - monotonic_ms()
            if left_ms <= 0:
                raise RequestTimedOutError(f"the commit of {_names(offsets)} timed out")
            try:
                response = self._coordinator.call(
                    self._group_id,
                    "OffsetCommit",
                    commit_request(self._group_id, member_id, epoch, offsets),
                    group_pb2.OffsetCommitResponse,
                    left_ms,
                )
            except (UnknownMemberIdError, FencedMemberEpochError) as error:
                raise CommitFailedError(
                    f"the consumer is no longer a member of group {self._group_id!r} ({error}): "
                    "its partitions may belong to another member now"
                ) from error
            except StaleMemberEpochError as error:
                self._before_stale_retry(offsets, epoch, deadline_ms, error)
                continue
            raise_partition_errors(response)
            return

    def _before_stale_retry(
        self, offsets: Offsets, epoch: int, deadline_ms: int, error: StaleMemberEpochError
    ) -> None:
        """After STALE_MEMBER_EPOCH: waits for a newer epoch, or raises CommitFailedError."""
        if not self._member.owns_all(offsets):
            raise CommitFailedError(
                f"the consumer gave up some of {_names(offsets)} while committing them: the "
                "new owner's position counts now"
            ) from error
        left_ms = deadline_ms - monotonic_ms()
        if left_ms <= 0:
            raise CommitFailedError(
                f"member epoch {epoch} stayed stale until the commit's deadline ({error})"
            ) from error
        wait_ms = min(left_ms, max(self._retry_backoff_ms, 1) * 10, RETRY_BACKOFF_MAX_MS)
        self._member.wait_for_epoch_change(epoch, wait_ms)

    # --- committed offsets ---

    def fetch(
        self, partitions: Collection[TopicPartition], timeout_ms: int
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset of each partition (None: none), on the caller's
        thread. Raises a partition's error naming it."""
        if not partitions:
            return {}
        response = self._coordinator.call(
            self._group_id,
            "OffsetFetch",
            fetch_request(self._group_id, partitions),
            group_pb2.OffsetFetchResponse,
            timeout_ms,
            item_errors=partition_errors,
        )
        found = fetch_results(response)
        return {tp: found.get(tp) for tp in partitions}


def raise_partition_errors(response: group_pb2.OffsetCommitResponse) -> None:
    """Raises the first partition's error, naming every partition that failed."""
    failed: list[tuple[TopicPartition, KafkaError]] = [
        (
            TopicPartition(topic.topic, p.partition),
            error_for(p.error_code, p.error_message),
        )
        for topic in response.topics
        for p in topic.partitions
        if p.error_code != common_pb2.NONE
    ]
    if not failed:
        return
    tp, first = failed[0]
    others = ", ".join(f"{t} ({e.name})" for t, e in failed[1:])
    message = f"committing {tp}: {first.message or first.name}"
    if others:
        message += f"; also failed: {others}"
    raise error_for(first.code, message)


def _names(offsets: Iterable[TopicPartition]) -> str:
    names = sorted(str(tp) for tp in offsets)
    shown = ", ".join(names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")
