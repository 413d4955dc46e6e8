"""One partition replica on this broker: its log, its registration from the metadata, and, as
leader, what it knows of its followers (Kafka's Partition).

As leader: the high-water mark is the smallest log end offset over the ISR (this broker's own log
end for itself), never moves back, and does not advance while the ISR is smaller than
`min.insync.replicas` (module `isr` holds the arithmetic). Follower fetches report each
follower's log end offset and when it last caught up; `propose_isr` says what AlterPartition to
send (one in flight at a time), and the answer takes effect when the metadata brings it. A new
leader epoch forgets every follower (they are counted as caught up from that moment).

As follower: `append_as_follower` stores fetched batches and takes the leader's high-water mark
(capped by the local log end); truncation by leader epochs is the fetcher's business.

Waking waiters: every change a request may be waiting for (the log end or high-water mark
moving, a truncation, a new registration, the replica dropped) calls `on_change` (the replica
manager's `notify`) with what moved (`Change`) after the partition's locks are released, so
callers never signal for it.
Request handlers read and write through the methods here; `log` is for the replica manager,
which opens, reconfigures and closes it.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import NamedTuple

from pykraft.broker import isr as isr_rules
from pykraft.broker import latency_trace
from pykraft.broker.isr import FollowerState
from pykraft.broker.local_changes import LocalPartition
from pykraft.broker.log import AppendInfo, LogError, PartitionLog, RangeRead, ReadResult
from pykraft.broker.log.dir_checkpoints import DeferredWrites
from pykraft.broker.partition_watches import Change
from pykraft.proto import common_pb2

# How long after the high-water mark moved a follower's parked fetch is answered for that news
# alone (case H): within it, the next append answers the fetch with records and the mark.
HIGH_WATERMARK_NEWS_DELAY_MS = 10


class LeaderAppend(NamedTuple):
    """What `append_as_leader` wrote, and in which leader epoch."""

    info: AppendInfo
    leader_epoch: int


class AckState(enum.Enum):
    """Where an acks=all append stands (`Partition.ack_state`)."""

    WAIT = "wait"  # still led in its epoch; the high-water mark has not reached it yet
    DONE = "done"  # every in-sync replica has it: acknowledge
    LOST = "lost"  # leadership moved or the replica went away: the records may be gone


class Partition:
    """A partition this broker hosts; thread-safe."""

    def __init__(
        self,
        local: LocalPartition,
        log: PartitionLog,
        *,
        broker_id: int,
        min_insync_replicas: int,
        now_ms: int,
        on_change: Callable[[Change], None],
        last_fetch_ms: Callable[[int], int] = lambda broker_id: 0,
    ) -> None:
        self.log = log
        self._on_change = on_change
        # When a broker last fetched from this one, in its fetch session (0: not in one).
        self._last_fetch_ms = last_fetch_ms
        self._broker_id = broker_id
        self._lock = threading.Lock()
        # Held across a role change and across a fetcher's write, so neither sees half the other.
        self._role_lock = threading.Lock()
        self._local = local
        self._min_insync_replicas = min_insync_replicas
        self._followers = self._fresh_followers(local, now_ms)
        self._leader_epoch_start_offset = log.log_end_offset
        # The partition epoch an AlterPartition was sent for; None when none is in flight.
        self._alter_in_flight: int | None = None
        # The replicas that AlterPartition asks to add (KIP-497's maximal ISR is the ISR plus
        # these): the high-water mark waits for them until the answer arrives.
        self._joining: frozenset[int] = frozenset()
        # Set once the replica manager dropped this replica (deleted, or the broker closing).
        self._detached = False
        # When the high-water mark last moved (as leader): news of it is due to followers
        # HIGH_WATERMARK_NEWS_DELAY_MS later.
        self._high_watermark_moved_ms = now_ms

    @property
    def local(self) -> LocalPartition:
        return self._local

    @property
    def topic(self) -> str:
        return self._local.topic

    @property
    def partition(self) -> int:
        return self._local.partition

    @property
    def leader_id(self) -> int:
        return self._local.registration.leader

    @property
    def leader_epoch(self) -> int:
        return self._local.registration.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        return self._local.registration.isr

    @property
    def min_insync_replicas(self) -> int:
        return self._min_insync_replicas

    @property
    def is_leader(self) -> bool:
        return self._local.registration.leader == self._broker_id

    @property
    def in_sync(self) -> bool:
        """Whether this replica is in the ISR the metadata names (a leader always is)."""
        return self._broker_id in self._local.registration.isr

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def latest_epoch(self) -> int:
        """The leader epoch of the log's last batch (what a follower fetches after)."""
        return self.log.latest_epoch

    def read(self, offset: int, *, bytes_max: int, upper_offset: int | None = None) -> ReadResult:
        """Whole batches from `offset`, none holding `upper_offset` or above (default: the log
        end), as PartitionLog.read."""
        return self.log.read(offset, bytes_max=bytes_max, upper_offset=upper_offset)

    def read_committed(self, offset: int, *, bytes_max: int) -> ReadResult:
        """What a consumer may see: `read` up to the high-water mark."""
        return self.log.read(offset, bytes_max=bytes_max, upper_offset=self.log.high_watermark)

    def read_committed_range(self, offset: int, *, bytes_max: int) -> RangeRead:
        """`read_committed`'s batches as a range of a segment file, for sending with sendfile
        (PartitionLog.read_range); the caller closes the range."""
        return self.log.read_range(
            offset, bytes_max=bytes_max, upper_offset=self.log.high_watermark
        )

    def committed_offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record with a timestamp >= `timestamp_ms`, or
        None; an answer at or above the high-water mark is hidden, as from consumers."""
        found = self.log.offset_for_timestamp(timestamp_ms)
        return found if found is not None and found[0] < self.log.high_watermark else None

    def update(self, local: LocalPartition, *, min_insync_replicas: int, now_ms: int) -> None:
        """Takes a newer registration (or new configs). A new leader epoch forgets what the
        previous epoch knew of the followers and counts them as caught up now; a new partition
        epoch ends the AlterPartition in flight (its answer has arrived)."""
        with self._role_lock, self._lock:
            old = self._local.registration
            new = local.registration
            assert new.leader_epoch >= old.leader_epoch, (old, new)
            assert new.partition_epoch >= old.partition_epoch, (old, new)
            if new.leader_epoch != old.leader_epoch:
                self._followers = self._fresh_followers(local, now_ms)
                self._leader_epoch_start_offset = self.log.log_end_offset
            if self._alter_in_flight is not None and new.partition_epoch > self._alter_in_flight:
                self._alter_in_flight = None
                self._joining = frozenset()
            self._local = local
            self._min_insync_replicas = min_insync_replicas
            self._advance_high_watermark(now_ms)
        self._on_change(Change.ALL)

    def _fresh_followers(self, local: LocalPartition, now_ms: int) -> dict[int, FollowerState]:
        replicas = local.registration.replicas
        return {
            r: FollowerState(last_caught_up_ms=now_ms) for r in replicas if r != self._broker_id
        }

    def epoch_error(self, current_leader_epoch: int) -> LogError | None:
        """Kafka's check of the epoch a client believes in (-1: no check)."""
        epoch = self.leader_epoch
        if current_leader_epoch < 0 or current_leader_epoch == epoch:
            return None
        if current_leader_epoch < epoch:
            return LogError(
                common_pb2.FENCED_LEADER_EPOCH,
                f"leader epoch {current_leader_epoch} is older than the current {epoch}",
            )
        return LogError(
            common_pb2.UNKNOWN_LEADER_EPOCH,
            f"leader epoch {current_leader_epoch} is newer than this broker's {epoch}",
        )

    def append_as_leader(self, batches: bytes, *, acks: int, now_ms: int) -> LeaderAppend:
        """Appends with the current leader epoch, under the role lock so a role change cannot
        interleave. LogError(NOT_LEADER_OR_FOLLOWER) if this replica no longer leads; with
        acks=-1 and an ISR smaller than min.insync.replicas, LogError(NOT_ENOUGH_REPLICAS);
        either before anything is written."""
        with self._role_lock:
            if not self.is_leader:
                raise LogError(
                    common_pb2.NOT_LEADER_OR_FOLLOWER,
                    f"{self.topic}-{self.partition} is now led by broker {self.leader_id}",
                )
            isr, needed = self.isr, self._min_insync_replicas
            if acks == -1 and len(isr) < needed:
                raise LogError(
                    common_pb2.NOT_ENOUGH_REPLICAS,
                    f"the ISR {list(isr)} is smaller than min.insync.replicas={needed}",
                )
            epoch = self.leader_epoch
            info = self.log.append_as_leader(batches, leader_epoch=epoch, now_ms=now_ms)
        appended_from = None if info.duplicate else info.first_offset
        self._maybe_advance_high_watermark(now_ms, Change.LOG_END, appended_from)
        return LeaderAppend(info, epoch)

    def leads_in(self, leader_epoch: int) -> bool:
        """Whether this replica still leads in `leader_epoch`: an acks=all append written in
        that epoch may be acknowledged only while this holds (after a change, the log may have
        been truncated below it, and refilled by another leader)."""
        registration = self._local.registration
        return registration.leader == self._broker_id and registration.leader_epoch == leader_epoch

    def ack_state(self, leader_epoch: int, end_offset: int) -> AckState:
        """Decides, in one step, an acks=all append written in `leader_epoch` and ending at
        `end_offset`: DONE only while this replica still leads in that epoch and the high-water
        mark covers it. It reads under the lock under which `update` swaps the registration and
        the leader moves the high-water mark, so a role change cannot fall between the two
        reads (a follower's high-water mark may pass `end_offset` with other records)."""
        with self._lock:
            if self._detached or not self.leads_in(leader_epoch):
                return AckState.LOST
            return AckState.DONE if self.log.high_watermark >= end_offset else AckState.WAIT

    def detach(self) -> None:
        """The replica manager dropped this replica: every acks=all wait on it is LOST."""
        with self._lock:
            self._detached = True
        self._on_change(Change.ALL)

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """The (epoch, end offset) a fetcher at `fetch_offset` after a batch of
        `last_fetched_epoch` must truncate to, or None (see isr.diverging_epoch): as leader,
        or as a follower serving a consumer up to its high-water mark (its log is the
        leader's there)."""
        log_ = self.log
        if last_fetched_epoch == log_.latest_epoch and fetch_offset <= log_.log_end_offset:
            return None  # its last batch is of the latest epoch, which runs to the log end
        return isr_rules.diverging_epoch(
            last_fetched_epoch=last_fetched_epoch,
            fetch_offset=fetch_offset,
            leader_answer=log_.end_offset_for_epoch(last_fetched_epoch),
            leader_latest_epoch=log_.latest_epoch,
            leader_end_offset=log_.log_end_offset,
            leader_start_offset=log_.log_start_offset,
        )

    def on_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        now_ms: int,
        broker_epoch: int = isr_rules.UNDEFINED_BROKER_EPOCH,
        *,
        log_start_offset: int = isr_rules.UNDEFINED_OFFSET,
    ) -> bool:
        """As leader: follower `replica_id` (the incarnation of `broker_epoch`, its log
        starting at `log_start_offset`) asked for `fetch_offset`, so it holds everything below
        it (and was caught up if that is the log end); fetches by brokers that are not replicas
        are ignored. Says whether the high-water mark advanced."""
        with self._lock:
            if replica_id not in self._local.registration.replicas:
                return False
            state = self._followers.get(replica_id, FollowerState(last_caught_up_ms=now_ms))
            new = state.after_fetch(
                fetch_offset,
                self.log.log_end_offset,
                now_ms,
                broker_epoch,
                log_start_offset=log_start_offset,
            )
            self._followers[replica_id] = new
        if new.log_end_offset == state.log_end_offset and new.broker_epoch == state.broker_epoch:
            return False  # what the mark is computed from did not change (a caught-up poll)
        return self._maybe_advance_high_watermark(now_ms)

    def caught_up_poll(
        self,
        replica_id: int,
        fetch_offset: int,
        last_fetched_epoch: int,
        now_ms: int,
        broker_epoch: int,
        *,
        log_start_offset: int,
    ) -> bool:
        """As leader, the cheap path of a follower's fetch of an idle partition: when it asks
        for the log end, after a batch of the latest epoch or of none (no divergence), with the
        log end and incarnation its last fetch gave, and was sent the current mark, notes the
        fetch (caught up now; the mark cannot move) and says so: it has all there is. False
        when the fetch needs the whole path (`on_follower_fetch` and the rest)."""
        log_ = self.log
        with self._lock:
            state = self._followers.get(replica_id)
            if (
                state is None
                or fetch_offset != state.log_end_offset
                or fetch_offset != log_.log_end_offset
                or broker_epoch != state.broker_epoch
                or last_fetched_epoch not in (log_.latest_epoch, isr_rules.UNDEFINED_EPOCH)
                or log_.high_watermark != state.high_watermark_sent
                or not self.is_leader
                or replica_id not in self._local.registration.replicas
            ):
                return False
            self._followers[replica_id] = state.after_fetch(
                fetch_offset, fetch_offset, now_ms, broker_epoch, log_start_offset=log_start_offset
            )
            return True

    def high_watermark_for(self, replica_id: int) -> tuple[int, int | None]:
        """As leader, building an answer to follower `replica_id`: the high-water mark to
        send, and when it is news to that follower worth an answer of its own (None: the
        mark is not above what its last answer carried). News answers its long poll (Kafka's
        DelayedFetch, case H), so followers, and the consumers they serve, learn the mark
        promptly; it is due HIGH_WATERMARK_NEWS_DELAY_MS after the mark last moved, so that
        under load the mark rides along with the next records instead of costing each
        follower a round trip per produce. A broker that is not a replica never gets news."""
        with self._lock:
            high_watermark = self.log.high_watermark
            state = self._followers.get(replica_id)
            if state is None or high_watermark <= state.high_watermark_sent:
                return high_watermark, None
            return high_watermark, self._high_watermark_moved_ms + HIGH_WATERMARK_NEWS_DELAY_MS

    def high_watermark_sent(self, replica_id: int, high_watermark: int) -> None:
        """As leader: an answer carrying `high_watermark` went to follower `replica_id`."""
        with self._lock:
            state = self._followers.get(replica_id)
            if state is not None and high_watermark > state.high_watermark_sent:
                self._followers[replica_id] = state.after_answer(high_watermark)

    def follower_states(self) -> dict[int, FollowerState]:
        with self._lock:
            return dict(self._followers)

    def _maybe_advance_high_watermark(
        self, now_ms: int, change: Change = Change.NONE, appended_from: int | None = None
    ) -> bool:
        """Raises the high-water mark to the smallest log end offset over the maximal ISR (the
        ISR and the replicas an AlterPartition in flight adds; only as leader, and only with
        at least min.insync.replicas in the ISR); says whether it moved. Wakes the waiters of
        `change` (what the caller moved: followers' long polls for an append), and of the mark
        if it moved. After an append at `appended_from`, the followers that held the whole log
        were caught up as of their last fetch (`isr.note_caught_up_until_append`)."""
        with self._lock:
            if appended_from is not None:
                isr_rules.note_caught_up_until_append(
                    self._followers, appended_from, now_ms, self._last_fetch_ms
                )
            moved = self._advance_high_watermark(now_ms)
            high_watermark = self.log.high_watermark
        if moved:
            if latency_trace.TRACE is not None:
                latency_trace.TRACE.note(
                    latency_trace.Step.HIGH_WATERMARK, self.topic, self.partition, high_watermark
                )
            change |= Change.HIGH_WATERMARK
        if change:
            self._on_change(change)
        return moved

    def _advance_high_watermark(self, now_ms: int) -> bool:
        """Holds `_lock`, under which `ack_state` reads the high-water mark."""
        if not self.is_leader:
            return False
        candidate = isr_rules.high_watermark_candidate(
            leader_id=self._broker_id,
            leader_end_offset=self.log.log_end_offset,
            isr=self.isr,
            joining=self._joining,
            followers=self._followers,
            min_insync_replicas=self._min_insync_replicas,
        )
        if candidate is None or candidate <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(candidate)
        self._high_watermark_moved_ms = now_ms
        return True

    def propose_isr(
        self, *, now_ms: int, lag_time_max_ms: int, eligible: Mapping[int, int]
    ) -> tuple[int, ...] | None:
        """As leader with no AlterPartition in flight: the ISR to ask for (lagging followers
        out, caught-up ones in, among the `eligible` brokers: id -> registered broker epoch),
        marking it in flight; None when nothing should change. The caller sends it and calls
        `alter_failed` if the controller refused or did not answer."""
        with self._lock:
            if not self.is_leader or self._alter_in_flight is not None:
                return None
            registration = self._local.registration
            lagging = isr_rules.out_of_sync_replicas(
                leader_id=self._broker_id,
                isr=registration.isr,
                followers=self._followers,
                leader_end_offset=self.log.log_end_offset,
                now_ms=now_ms,
                lag_time_max_ms=lag_time_max_ms,
            )
            joining = isr_rules.replicas_to_add(
                isr=registration.isr,
                replicas=registration.replicas,
                followers=self._followers,
                high_watermark=self.log.high_watermark,
                leader_epoch_start_offset=self._leader_epoch_start_offset,
                eligible=eligible,
                now_ms=now_ms,
                lag_time_max_ms=lag_time_max_ms,
            )
            if not lagging and not joining:
                return None
            self._alter_in_flight = registration.partition_epoch
            self._joining = frozenset(joining)
            allowed = set(eligible) | {self._broker_id}
            return tuple(sorted(((set(registration.isr) - lagging) | joining) & allowed))

    def alter_failed(self, now_ms: int) -> None:
        """The AlterPartition in flight got no usable answer: a later check may send again. The
        replicas it would have added no longer hold the high-water mark back."""
        with self._lock:
            self._alter_in_flight = None
            self._joining = frozenset()
        self._maybe_advance_high_watermark(now_ms)

    @contextmanager
    def following(self, leader_id: int, leader_epoch: int) -> Iterator[bool]:
        """For the fetcher: holds off role changes while it writes the log, and says whether
        this replica still follows `leader_id` in `leader_epoch` (else it must not write)."""
        with self._role_lock:
            registration = self._local.registration
            yield (
                not self.is_leader
                and registration.leader == leader_id
                and registration.leader_epoch == leader_epoch
            )

    def append_as_follower(self, batches: bytes, *, leader_high_watermark: int) -> AppendInfo:
        """As follower: appends fetched batches and takes the leader's high-water mark, capped
        by the local log end."""
        info = self.log.append_as_follower(batches)
        moved = self._take_leader_high_watermark(leader_high_watermark)
        self._on_change(Change.LOG_END | Change.HIGH_WATERMARK if moved else Change.LOG_END)
        if latency_trace.TRACE is not None:
            latency_trace.TRACE.note(
                latency_trace.Step.FOLLOWER_APPEND,
                self.topic,
                self.partition,
                info.last_offset + 1,
                replica=self._broker_id,
            )
        return info

    def take_leader_high_watermark(self, leader_high_watermark: int) -> None:
        """As follower, from a fetch that brought no records: the leader's high-water mark,
        capped by the local log end (it never moves back); wakes waiters only if it moved."""
        if self._take_leader_high_watermark(leader_high_watermark):
            self._on_change(Change.HIGH_WATERMARK)

    def _take_leader_high_watermark(self, leader_high_watermark: int) -> bool:
        log_end_offset = self.log.log_end_offset
        return self.log.update_high_watermark(min(max(leader_high_watermark, 0), log_end_offset))

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The local answer to OffsetForLeaderEpoch (see PartitionLog.end_offset_for_epoch)."""
        return self.log.end_offset_for_epoch(epoch)

    def truncate_to(self, offset: int, deferred: DeferredWrites | None = None) -> None:
        """As follower whose log diverged from the leader's: see PartitionLog.truncate_to."""
        self.log.truncate_to(offset, deferred)
        self._on_change(Change.ALL)

    def truncate_fully_and_start_at(
        self, offset: int, deferred: DeferredWrites | None = None
    ) -> None:
        """As follower below the leader's log start: see
        PartitionLog.truncate_fully_and_start_at."""
        self.log.truncate_fully_and_start_at(offset, deferred)
        self._on_change(Change.ALL)
