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
  its records go out as one `Append` stamped with this controller's epoch, and its answer comes
  only from the `AppendDone` that reports them applied.
- When leadership is lost (a `RaftPolled` with another leader or term, a failed append), every
  write in flight is answered NOT_CONTROLLER at once: its outcome is unknown here, which is Kafka's
  contract too. The pending image falls back to the committed one. The state machine's epoch check
  (`batch.py`) makes sure a deposed controller's batches never apply.
- While ACTIVATING (its LEADER_CHANGE not yet applied) the core takes no requests
  (`accepts_requests` is False): decisions are never taken on a partial image.
- Timers: brokers whose session expired are fenced; every
  `leader.imbalance.check.interval.seconds` leadership moves back to preferred replicas.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from google.protobuf.message import Message

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
from pykraft.quorum.metadata_fetch import FetchPlan, plan_fetch
from pykraft.quorum.raft.api import RaftStatus
from pykraft.quorum.replies import controller_listeners, error_response, not_controller
from pykraft.quorum.roles import Role, RoleState
from pykraft.quorum.state_machine import Applied, MetadataStateMachine

log = logging.getLogger(__name__)

# How often parked fetches are looked at again, so one is answered soon after its records commit.
FETCH_RECHECK_MS = 10


@dataclass(frozen=True)
class _InFlight:
    """A write appended and not yet committed. `request_id` None: nobody waits for it."""

    request_id: int | None
    response: Message
    response_cls: type[Message]


class ControllerCore:
    """One controller's decisions and state, stepped by a driver; see the module docstring.
    Not thread-safe: one driver thread steps it."""

    def __init__(self, config: ControllerConfig, new_id: IdSource) -> None:
        self.config = config
        self.state = MetadataStateMachine(tail_records_max=config.metadata_tail_records_max)
        self._new_id = new_id
        self._role = RoleState.standby()
        self._heartbeats = HeartbeatTracker(config.broker_session_timeout_ms)
        self._pending_image = self.state.image
        self._inflight: dict[int, _InFlight] = {}  # by append id, in append order
        self._barrier_append_id: int | None = None
        self._next_append_id = 0
        self._parked_fetches: list[FetchRequest] = []
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
        self._barrier_append_id = self._append(barrier, None, out)

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
        for write in inflight.values():
            # Their outcome is unknown here: they may still commit under the next controller.
            self._answer(out, write.request_id, self._not_controller(write.response_cls, reason))
        log.info("node %d stops being %s: %s", self.config.node_id, was.value, reason)

    def _stop(self, reason: str, out: Output) -> None:
        self._stop_reason = reason
        parked, self._parked_fetches = self._parked_fetches, []
        for fetch in parked:
            self._answer(out, fetch.request_id, self._not_controller(fetch.response_cls, reason))

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
        if not result.records:
            self._answer(out, request_id, result.response)
            return
        epoch = self._role.epoch
        self._pending_image = _replayed(self._pending_image, result.records, epoch)
        batch = QuorumBatch(BatchKind.RECORDS, epoch, self.config.node_id, result.records)
        append_id = self._append(batch, request_id, out)
        self._inflight[append_id] = _InFlight(request_id, result.response, response_cls)

    def _on_append_done(self, done: AppendDone, now_ms: int, out: Output) -> None:
        if done.append_id == self._barrier_append_id:
            self._on_barrier(done, now_ms, out)
            return
        write = self._inflight.pop(done.append_id, None)
        if write is None:
            return  # answered NOT_CONTROLLER when this node stepped down
        if not isinstance(done.result, Applied) or done.error is not None:
            reason = done.error.name if done.error is not None else f"batch rejected: {done.result}"
            self._answer(out, write.request_id, self._not_controller(write.response_cls, reason))
            if self._role.role is not Role.STANDBY:
                self._deactivate(f"a write failed ({reason})", out)
            return
        self._answer(out, write.request_id, write.response)
        if not self._inflight and self.state.active_epoch == self._role.epoch:
            # Nothing in flight: the pending image must now be exactly the committed one. (When
            # a newer controller's LEADER_CHANGE applied in the same poll, it is not; this node
            # steps down on the Raft status that follows.)
            assert self._pending_image.offset == self.state.image.offset
            self._pending_image = self.state.image

    def _append(self, batch: QuorumBatch, request_id: int | None, out: Output) -> int:
        append_id = self._next_append_id
        self._next_append_id += 1
        out.appends.append(Append(append_id, batch, request_id))
        return append_id

    # ---- timers and fetches ------------------------------------------------------------------

    def _run_timers(self, now_ms: int, out: Output) -> None:
        if self._role.role is not Role.ACTIVE:
            return
        self._fence_expired_brokers(now_ms, out)
        self._balance_partition_leaders(now_ms, out)

    def _fence_expired_brokers(self, now_ms: int, out: Output) -> None:
        expired = self._heartbeats.expired(self._pending_image, now_ms)
        if not expired:
            return
        log.info("fencing brokers %s: no heartbeat within the session timeout", expired)
        for broker_id in expired:
            self._heartbeats.remove(broker_id)
        self._write_internal(
            lambda ctx: _as_header_result(fence_expired_brokers(ctx.image, expired)), now_ms, out
        )

    def _balance_partition_leaders(self, now_ms: int, out: Output) -> None:
        """Every `leader.imbalance.check.interval.seconds`, when `auto.leader.rebalance.enable`,
        moves leadership back to preferred replicas that can take it (Kafka's periodic task)."""
        if not self.config.auto_leader_rebalance_enable or now_ms < self._next_balance_ms:
            return
        self._next_balance_ms = now_ms + self.config.leader_imbalance_check_interval_seconds * 1000
        self._write_internal(
            lambda ctx: _as_header_result(balance_partition_leaders(ctx.image)), now_ms, out
        )

    def _write_internal(self, decide: Decide, now_ms: int, out: Output) -> None:
        """A write the controller decides for itself; nobody waits for its answer."""
        try:
            self._write(None, common_pb2.ResponseHeader, decide, now_ms, out)
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
        if self._role.role is Role.ACTIVE:
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
