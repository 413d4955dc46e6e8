"""The controller with no I/O: `ControllerCore.step(event, now_ms) -> Output` (etcd's `Step` and
`Ready`; Kafka's QuorumController write path).

The core owns everything a controller decides with: its role (`roles.py`), the replicated state
(`MetadataStateMachine`, which the driver hands to the Raft log to apply committed entries), the
pending image (committed image plus this controller's batches in flight), the broker sessions
(`HeartbeatTracker`), the writes awaiting commit and the parked metadata fetches. It never reads a
clock (time comes in as `now_ms`), starts no thread, and draws topic ids from an injected source;
the driver (`quorum_controller.py`, or the simulation test) performs its `Output`.

What a caller may rely on:
- A write is decided against the pending image, so concurrent requests see each other's effects;
  its records go out in one `Append` stamped with this controller's epoch, and its answer comes
  only from the `AppendDone` that reports them applied. Writes decided while an entry of this
  controller is in flight share the next one (group commit, `entry_group.py`); it leaves when
  nothing is in flight, when full, or after `append_linger_ms`.
- When leadership is lost (a `RaftPolled` with another leader or term, a failed append), every
  write in flight or waiting for its entry is answered NOT_CONTROLLER at once: its outcome is
  unknown here, which is Kafka's contract too. The pending image falls back to the committed
  one. The state machine's epoch check (`batch.py`) makes sure a deposed controller's batches
  never apply.
- A standby that knows no leader (an election is under way) holds requests until one is known
  (`leader_wait.py`), then redirects them or, once active itself, decides them.
- While ACTIVATING (its LEADER_CHANGE not yet applied) the core takes no requests
  (`accepts_requests` is False): decisions are never taken on a partial image.
- Timers: brokers whose session expired are fenced; every
  `leader.imbalance.check.interval.seconds` leadership moves back to preferred replicas.
"""

from __future__ import annotations

import logging

from google.protobuf.message import Message

from pykraft.metadata_log.codec import encode_record_frames
from pykraft.metadata_log.delta import replay_all
from pykraft.metadata_log.errors import InvariantError
from pykraft.metadata_log.image import MetadataImage
from pykraft.metadata_log.records import (
    METADATA_VERSION_FEATURE,
    METADATA_VERSION_LATEST,
    FeatureLevelRecord,
    NoOpRecord,
    Record,
)
from pykraft.proto import common_pb2
from pykraft.quorum.batch import BatchKind, QuorumBatch
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.controller.cluster import fence_expired_brokers
from pykraft.quorum.controller.elections import balance_partition_leaders
from pykraft.quorum.controller.heartbeats import HeartbeatTracker
from pykraft.quorum.controller.result import ControllerResult
from pykraft.quorum.entry_group import EntryLimits, OpenEntry, PendingWrite
from pykraft.quorum.events import (
    Answer,
    Append,
    AppendDone,
    Decide,
    DecideContext,
    Event,
    FetchRequest,
    IdSource,
    Output,
    RaftPolled,
    ReadContext,
    ReadRequest,
    Request,
    Stop,
    Tick,
    WriteRequest,
)
from pykraft.quorum.leader_wait import LeaderWait
from pykraft.quorum.metadata_fetch import FetchPlan, plan_fetch
from pykraft.quorum.raft.api import RaftStatus
from pykraft.quorum.replies import (
    controller_listeners,
    entry_too_large,
    error_response,
    header_of,
    not_controller,
)
from pykraft.quorum.roles import Role, RoleState
from pykraft.quorum.state_machine import Applied, MetadataStateMachine

log = logging.getLogger(__name__)

# Entries in flight past which a step of brokers leaving partitions waits for a commit: one poll
# applies at most this many steps (about 6 ms each at 1,000 partitions).
LEAVING_ENTRIES_IN_FLIGHT_MAX = 4
# How often parked fetches are looked at again, so one is answered soon after its records commit.
FETCH_RECHECK_MS = 10


class ControllerCore:
    """One controller's decisions and state, stepped by a driver; see the module docstring.
    Not thread-safe: one driver thread steps it."""

    def __init__(self, config: ControllerConfig, new_id: IdSource) -> None:
        self.config = config
        self.state = MetadataStateMachine(tail_records_max=config.metadata_tail_records_max)
        self._new_id = new_id
        self._role = RoleState.standby()
        self._heartbeats = HeartbeatTracker(
            config.broker_session_timeout_ms, config.partition_changes_per_step_max
        )
        self._pending_image = self.state.image
        self._inflight: dict[int, list[PendingWrite]] = {}  # by append id, in append order
        self._open_entry: OpenEntry | None = None  # writes decided, not yet appended
        self._entry_base = self._pending_image  # the pending image the open entry began on
        self._entry_limits = EntryLimits(
            operations_max=config.entry_operations_max,
            bytes_max=config.raft_entry_bytes_max,
            linger_ms=config.append_linger_ms,
        )
        self._barrier_append_id: int | None = None
        self._next_append_id = 0
        self._parked_fetches: list[FetchRequest] = []
        self._leader_wait = LeaderWait(config.events_queue_max)
        self._next_balance_ms = 0  # set when this node becomes active
        self._raft: RaftStatus | None = None
        self._stop_reason: str | None = None

    @property
    def role(self) -> RoleState:
        return self._role

    @property
    def raft_status(self) -> RaftStatus | None:
        """The Raft status last stepped (None before the first poll). Immutable, like `role`
        and `state.image`: what other threads (the metrics) may read."""
        return self._raft

    def broker_metadata_offsets(self) -> dict[int, int]:
        """The metadata offset each broker last reported in a heartbeat (the active controller
        hears them); a copy that other threads may take."""
        return self._heartbeats.metadata_offsets()

    @property
    def accepts_requests(self) -> bool:
        """False while ACTIVATING: requests wait (in the driver's bounded queue) until every
        entry of earlier terms is applied."""
        return self._role.role is not Role.ACTIVATING

    def step(self, event: Event, now_ms: int) -> Output:
        """Handles one event at `now_ms`; returns what to append, answer and when to tick."""
        out = Output()
        if isinstance(event, WriteRequest | ReadRequest | FetchRequest):
            self._on_request(event, now_ms, out)
        elif isinstance(event, AppendDone):
            self._on_append_done(event, now_ms, out)
        elif isinstance(event, RaftPolled):
            self._follow_raft_role(event.status, out)
        elif isinstance(event, Stop):
            self._stop(event.reason, out)
        else:
            assert isinstance(event, Tick)
            self._run_timers(now_ms, out)
        self._release_held_requests(now_ms, out)
        if self._open_entry is not None and self._open_entry.due(
            now_ms, entries_in_flight=len(self._inflight)
        ):
            self._append_open_entry(out)
        self._answer_fetches(now_ms, out)
        out.wake_at_ms = self._wake_at_ms(now_ms)
        return out

    # ---- leadership --------------------------------------------------------------------------

    def _follow_raft_role(self, status: RaftStatus, out: Output) -> None:
        self._raft = status
        role = self._role
        if role.role is Role.STANDBY:
            if status.is_leader:
                self._activate(status.term, out)
        elif not status.is_leader or status.term != role.epoch:
            reason = f"leadership moved (term {status.term}, leader {status.leader_id})"
            self._deactivate(reason, out)

    def _activate(self, term: int, out: Output) -> None:
        self._role = self._role.to_activating(term)
        log.info("node %d leads term %d; appending LEADER_CHANGE", self.config.node_id, term)
        records: tuple[Record, ...] = (NoOpRecord(),)
        if METADATA_VERSION_FEATURE not in self.state.image.features.levels:
            # The first controller of a new cluster bootstraps metadata.version (Kafka's rule), so
            # every snapshot opens with the version of the records that follow.
            records += (FeatureLevelRecord(METADATA_VERSION_FEATURE, METADATA_VERSION_LATEST),)
        barrier = QuorumBatch(BatchKind.LEADER_CHANGE, term, self.config.node_id, records)
        self._barrier_append_id = self._append(barrier, barrier.encode(), (), out)

    def _on_barrier(self, done: AppendDone, now_ms: int, out: Output) -> None:
        self._barrier_append_id = None
        if self._role.role is not Role.ACTIVATING:
            return
        term = self._role.epoch
        if not isinstance(done.result, Applied):
            self._deactivate(f"LEADER_CHANGE for term {term} did not land: {done.result}", out)
            return
        self._role = self._role.to_active()
        self._pending_image = self.state.image
        self._heartbeats.reset(self.state.image, now_ms)
        self._next_balance_ms = now_ms + self.config.leader_imbalance_check_interval_seconds * 1000
        log.info("node %d is the active controller (epoch %d)", self.config.node_id, term)

    def _deactivate(self, reason: str, out: Output) -> None:
        was = self._role.role
        self._role = self._role.to_standby()
        self._pending_image = self.state.image
        self._barrier_append_id = None
        inflight, self._inflight = self._inflight, {}
        for writes in inflight.values():
            # Their outcome is unknown here: they may still commit under the next controller.
            self._fail_writes(writes, reason, out)
        self._drop_open_entry(reason, out)
        log.info("node %d stops being %s: %s", self.config.node_id, was.value, reason)

    def _stop(self, reason: str, out: Output) -> None:
        self._stop_reason = reason
        self._drop_open_entry(reason, out)  # the writes in flight end with the log's SHUTDOWN
        parked: list[Request] = [
            *self._parked_fetches,
            *self._leader_wait.release(0, leader_known=True),
        ]
        self._parked_fetches = []
        for request in parked:
            self._answer(
                out, request.request_id, self._not_controller(request.response_cls, reason)
            )

    # ---- requests ----------------------------------------------------------------------------

    def _on_request(self, request: Request, now_ms: int, out: Output) -> None:
        if self._stop_reason is not None:
            response = self._not_controller(request.response_cls, self._stop_reason)
            self._answer(out, request.request_id, response)
            return
        assert self.accepts_requests, "a request was stepped while the controller activates"
        if now_ms > request.deadline_ms and not isinstance(request, FetchRequest):
            out.answers.append(Answer(request.request_id, None))  # its caller timed out
        elif self._role.role is Role.ACTIVE or (
            isinstance(request, FetchRequest) and request.allow_standby
        ):
            self._handle(request, now_ms, out)
        elif self._leader_id() is None and self._leader_wait.hold(request, now_ms):
            pass  # an election is under way: answered once it ends (leader_wait.py)
        else:
            self._answer(out, request.request_id, self._not_controller(request.response_cls))

    def _leader_id(self) -> int | None:
        """The leader as far as a client should be sent to it: none while this node has lost its
        connection to the one Raft still names. After a kill -9 of the active controller the
        followers name it until their election timeout fires, and redirecting clients to it
        sent them into their retry backoff, past the end of the election."""
        raft = self._raft
        if raft is None or raft.leader_id is None:
            return None
        lost = any(v.node_id == raft.leader_id and not v.connected for v in raft.voters)
        return None if lost and raft.leader_id != self.config.node_id else raft.leader_id

    def _release_held_requests(self, now_ms: int, out: Output) -> None:
        """Requests held while no leader was known: decided here once this node is active,
        redirected once another node leads, or refused when their wait is over."""
        active = self._role.role is Role.ACTIVE
        leader_known = active or self._leader_id() not in (None, self.config.node_id)
        for request in self._leader_wait.release(now_ms, leader_known=leader_known):
            if now_ms > request.deadline_ms:
                out.answers.append(Answer(request.request_id, None))  # its caller timed out
            elif active:
                self._handle(request, now_ms, out)
            else:
                self._answer(out, request.request_id, self._not_controller(request.response_cls))

    def _handle(self, request: Request, now_ms: int, out: Output) -> None:
        try:
            if isinstance(request, WriteRequest):
                self._write(request.request_id, request.response_cls, request.decide, now_ms, out)
            elif isinstance(request, ReadRequest):
                self._answer(out, request.request_id, request.read(self._read_context()))
            else:
                self._parked_fetches.append(request)
        except InvariantError:
            raise
        except Exception as error:  # a bug in one handler must not take the controller down
            log.exception("handling %s failed", type(request).__name__)
            response = error_response(
                request.response_cls, common_pb2.UNKNOWN_SERVER_ERROR, str(error)
            )
            self._answer(out, request.request_id, response)

    def _write(
        self,
        request_id: int | None,
        response_cls: type[Message],
        decide: Decide,
        now_ms: int,
        out: Output,
        *,
        own_entry: bool = False,
    ) -> None:
        context = DecideContext(
            image=self._pending_image,
            next_offset=self._pending_image.offset + 1,
            now_ms=now_ms,
            cluster_id=self.config.cluster_id,
            heartbeats=self._heartbeats,
            new_topic_id=self._new_id,
        )
        result = decide(context)
        write = PendingWrite(request_id, result.response, response_cls)
        if not result.records:
            self._answer_after_pending_records(write, out)
            return
        frames = encode_record_frames(result.records)
        if self._entry_limits.too_large(len(frames)):
            response = entry_too_large(response_cls, len(frames), self._entry_limits.bytes_max)
            log.warning("refused a write: %s", header_of(response).error_message)
            self._answer(out, request_id, response)
            return
        if self._open_entry is not None and (
            own_entry or not self._open_entry.fits(len(frames), len(result.records))
        ):
            self._append_open_entry(out)
        if self._open_entry is None:
            self._open_entry = OpenEntry(now_ms, self._entry_limits)
            self._entry_base = self._pending_image
        self._pending_image = _replayed(self._pending_image, result.records, self._role.epoch)
        self._open_entry.add(result.records, frames, write)
        if own_entry:
            self._append_open_entry(out)

    def _answer_after_pending_records(self, write: PendingWrite, out: Output) -> None:
        """A write without records read the pending image: it is answered once every record it
        may have seen committed, with the last entry holding them (at once when none is)."""
        if self._open_entry is not None:
            self._open_entry.add_reader(write)
        elif self._inflight:
            self._inflight[next(reversed(self._inflight))].append(write)
        else:
            self._answer(out, write.request_id, write.response)

    def _append_open_entry(self, out: Output) -> None:
        entry, self._open_entry = self._open_entry, None
        assert entry is not None and self._role.role is Role.ACTIVE
        batch, payload = entry.seal(self._role.epoch, self.config.node_id)
        request_ids = tuple(w.request_id for w in entry.writes if w.request_id is not None)
        # Every write decided since the entry opened is in it: the pending image is its result.
        replayed = (self._entry_base, self._pending_image)
        append_id = self._append(batch, payload, request_ids, out, replayed)
        self._inflight[append_id] = entry.writes

    def _drop_open_entry(self, reason: str, out: Output) -> None:
        """Answers the writes never appended: they cannot commit, but they were decided on
        state this node no longer vouches for, so the caller retries on the active one."""
        entry, self._open_entry = self._open_entry, None
        if entry is not None:
            self._fail_writes(entry.writes, reason, out)

    def _fail_writes(self, writes: list[PendingWrite], reason: str, out: Output) -> None:
        for write in writes:
            self._answer(out, write.request_id, self._not_controller(write.response_cls, reason))

    def _on_append_done(self, done: AppendDone, now_ms: int, out: Output) -> None:
        if done.append_id == self._barrier_append_id:
            self._on_barrier(done, now_ms, out)
            return
        writes = self._inflight.pop(done.append_id, None)
        if writes is None:
            return  # answered NOT_CONTROLLER when this node stepped down
        if not isinstance(done.result, Applied) or done.error is not None:
            reason = done.error.name if done.error is not None else f"batch rejected: {done.result}"
            self._fail_writes(writes, reason, out)
            if self._role.role is not Role.STANDBY:
                self._deactivate(f"a write failed ({reason})", out)
            return
        for write in writes:
            self._answer(out, write.request_id, write.response)
        idle = not self._inflight and self._open_entry is None
        if idle and self.state.active_epoch == self._role.epoch:
            # Nothing in flight: the pending image must now be exactly the committed one. (When
            # a newer controller's LEADER_CHANGE applied in the same poll, it is not; this node
            # steps down on the Raft status that follows.)
            assert self._pending_image.offset == self.state.image.offset
            self._pending_image = self.state.image

    def _append(
        self,
        batch: QuorumBatch,
        payload: bytes,
        request_ids: tuple[int, ...],
        out: Output,
        replayed: tuple[MetadataImage, MetadataImage] | None = None,
    ) -> int:
        append_id = self._next_append_id
        self._next_append_id += 1
        self.state.remember(payload, batch, replayed)
        out.appends.append(Append(append_id, batch, request_ids, payload))
        return append_id

    # ---- timers and fetches ------------------------------------------------------------------

    def _run_timers(self, now_ms: int, out: Output) -> None:
        if self._role.role is not Role.ACTIVE:
            return
        self._fence_brokers(now_ms, out)
        self._balance_partition_leaders(now_ms, out)

    def _fence_brokers(self, now_ms: int, out: Output) -> None:
        """Starts fencing brokers whose session expired, or takes the next step of the brokers
        leaving their partitions (`controller/leaving.py`) in an entry of its own, so no turn
        decides, encodes or applies more than a step."""
        expired = self._heartbeats.expired(self._pending_image, now_ms)
        step_due = len(self._inflight) < LEAVING_ENTRIES_IN_FLIGHT_MAX  # commits keep up
        if expired:
            log.info("fencing brokers %s: no heartbeat within the session timeout", expired)
        elif not (self._heartbeats.leaving_in_progress and step_due):
            return
        self._write_internal(
            lambda ctx: _as_header_result(
                fence_expired_brokers(ctx.image, expired, ctx.heartbeats, ctx.next_offset)
            ),
            now_ms,
            out,
            own_entry=not expired,
        )
        if not self._heartbeats.leaving_in_progress:
            log.info("every fence and controlled shutdown move in progress is decided")

    def _balance_partition_leaders(self, now_ms: int, out: Output) -> None:
        """Every `leader.imbalance.check.interval.seconds`, when `auto.leader.rebalance.enable`,
        moves leadership back to preferred replicas that can take it (Kafka's periodic task)."""
        if not self.config.auto_leader_rebalance_enable or now_ms < self._next_balance_ms:
            return
        self._next_balance_ms = now_ms + self.config.leader_imbalance_check_interval_seconds * 1000
        self._write_internal(
            lambda ctx: _as_header_result(balance_partition_leaders(ctx.image)), now_ms, out
        )

    def _write_internal(
        self, decide: Decide, now_ms: int, out: Output, *, own_entry: bool = False
    ) -> None:
        """A write the controller decides for itself; nobody waits for its answer."""
        try:
            self._write(None, common_pb2.ResponseHeader, decide, now_ms, out, own_entry=own_entry)
        except InvariantError:
            raise
        except Exception:  # a bug in one decision must not take the controller down
            log.exception("a write the controller decided for itself failed")

    def _answer_fetches(self, now_ms: int, out: Output) -> None:
        if not self._parked_fetches:
            return
        waiting: list[FetchRequest] = []
        for fetch in self._parked_fetches:
            if self._role.role is not Role.ACTIVE and not fetch.allow_standby:
                self._answer(out, fetch.request_id, self._not_controller(fetch.response_cls))
            elif self.state.last_offset > fetch.after_offset or now_ms >= fetch.deadline_ms:
                plan = plan_fetch(self.state, fetch.after_offset, self.config)
                self._answer(out, fetch.request_id, plan)
            else:
                waiting.append(fetch)
        self._parked_fetches = waiting

    def _wake_at_ms(self, now_ms: int) -> int | None:
        """The earliest time after `now_ms` at which a `Tick` has work to do."""
        times: list[int] = []
        if self._parked_fetches:
            times.append(now_ms + FETCH_RECHECK_MS)
        if self._open_entry is not None:
            times.append(max(self._open_entry.wake_at_ms, now_ms + 1))
        held_until_ms = self._leader_wait.wake_at_ms()
        if held_until_ms is not None:
            times.append(max(held_until_ms, now_ms + 1))
        if self._role.role is Role.ACTIVE:
            if self._heartbeats.leaving_in_progress:
                times.append(now_ms + 1)
            expiry_ms = self._heartbeats.next_expiry_ms(now_ms)
            if expiry_ms is not None:
                times.append(expiry_ms)
            if self.config.auto_leader_rebalance_enable:
                times.append(max(self._next_balance_ms, now_ms + 1))
        return min(times, default=None)

    # ---- answers -----------------------------------------------------------------------------

    def _answer(self, out: Output, request_id: int | None, response: Message | FetchPlan) -> None:
        if request_id is not None:
            out.answers.append(Answer(request_id, response))

    def _read_context(self) -> ReadContext:
        assert self._raft is not None
        return ReadContext(
            image=self.state.image,
            raft=self._raft,
            config=self.config,
            active_controller_id=self.config.node_id,
        )

    def _not_controller(self, response_cls: type[Message], reason: str = "") -> Message:
        leader_id = self._raft.leader_id if self._raft is not None else None
        listeners = controller_listeners(self.config, self._raft)
        return not_controller(response_cls, self.config.node_id, listeners, leader_id, reason)


def _replayed(image: MetadataImage, records: tuple[Record, ...], epoch: int) -> MetadataImage:
    return replay_all(image, records).apply(
        offset=image.offset + len(records), epoch=max(epoch, image.epoch)
    )


def _as_header_result(
    result: ControllerResult[None],
) -> ControllerResult[common_pb2.ResponseHeader]:
    return ControllerResult(result.records, common_pb2.ResponseHeader())
