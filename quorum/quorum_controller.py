"""The controller: one thread owns the Raft log, the metadata state and every decision.

gRPC handlers never touch controller state. They submit an event (a write, a read or a metadata
fetch) to a bounded queue and wait on its future. The controller thread loops:

    poll Raft (network I/O, commits applied, fsync, then append callbacks)
    -> follow the Raft role (see `roles.py`)
    -> drain events: decide against the pending image, append, park the answer until commit
    -> timers (fence brokers whose session expired, preferred leader rebalance), parked
       metadata fetches.

A write is answered only from its append callback, which the Raft log fires only after the entry is
committed and fsynced; a decision is taken against the *pending* image (committed image plus this
controller's batches still in flight), so concurrent requests see each other's effects (Kafka's
QuorumController). When leadership is lost, in-flight writes are answered NOT_CONTROLLER: their
outcome is unknown to this node, which is the same contract as Kafka's.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

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
from pykraft.quorum.metadata_fetch import fetch_response
from pykraft.quorum.raft import AppendError, RaftConfig, RaftLog, RaftStatus
from pykraft.quorum.roles import Role, RoleState
from pykraft.quorum.state_machine import Applied, MetadataStateMachine

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)

POLL_IDLE_MS = 50
EVENTS_PER_POLL_MAX = 256


@dataclass(frozen=True)
class DecideContext:
    """What a write's decide function may read. Only valid on the controller thread."""

    image: MetadataImage
    next_offset: int
    now_ms: int
    cluster_id: str
    heartbeats: HeartbeatTracker

    @staticmethod
    def new_topic_id() -> uuid.UUID:
        return uuid.uuid4()


@dataclass(frozen=True)
class ReadContext:
    """What a read may see: the committed image and the quorum's state."""

    image: MetadataImage
    raft: RaftStatus
    config: ControllerConfig
    active_controller_id: int


@dataclass
class _Event:
    kind: str  # "write", "read" or "fetch"
    response_cls: type[Message]
    deadline_ms: int
    future: Future[Message]
    decide: Callable[[DecideContext], ControllerResult[Any]] | None = None
    read: Callable[[ReadContext], Message] | None = None
    fetch_after_offset: int = -1
    allow_standby: bool = False


class QuorumController:
    """Owns one controller's state on its own thread; see the module docstring."""

    def __init__(self, config: ControllerConfig, raft_config: RaftConfig) -> None:
        self.config = config
        self._raft_config = raft_config
        self._events: queue.Queue[_Event] = queue.Queue(maxsize=config.events_queue_max)
        self._state = MetadataStateMachine(tail_records_max=config.metadata_tail_records_max)
        self._role = RoleState.standby()
        self._heartbeats = HeartbeatTracker(config.broker_session_timeout_ms)
        self._pending_image = self._state.image
        self._inflight: list[_Event] = []
        self._parked_fetches: list[_Event] = []
        self._next_balance_ms = 0  # set when this node becomes active
        self._leader_id: int | None = None
        self._raft: RaftLog | None = None
        self._stopping = threading.Event()
        self._started = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="controller", daemon=True)

    # ---- thread-safe API -------------------------------------------------------------------

    def start(self, timeout_s: float = 30.0) -> None:
        self._thread.start()
        if not self._started.wait(timeout_s):
            raise RuntimeError("controller thread did not start")
        if self._failure is not None:
            raise RuntimeError("controller failed to start") from self._failure

    def stop(self) -> None:
        self._stopping.set()
        if self._raft is not None:
            self._raft.wakeup()
        self._thread.join(timeout=10)

    @property
    def failed(self) -> BaseException | None:
        return self._failure

    def write(
        self,
        decide: Callable[[DecideContext], ControllerResult[M]],
        response_cls: type[M],
        timeout_ms: int,
    ) -> M:
        event = _Event("write", response_cls, 0, Future(), decide=decide)
        return self._submit(event, response_cls, timeout_ms)

    def read(self, read: Callable[[ReadContext], M], response_cls: type[M], timeout_ms: int) -> M:
        event = _Event("read", response_cls, 0, Future(), read=read)
        return self._submit(event, response_cls, timeout_ms)

    def fetch(
        self,
        after_offset: int,
        wait_ms: int,
        response_cls: type[M],
        timeout_ms: int,
        *,
        allow_standby: bool = False,
    ) -> M:
        event = _Event(
            "fetch",
            response_cls,
            0,
            Future(),
            fetch_after_offset=after_offset,
            allow_standby=allow_standby,
        )
        return self._submit(event, response_cls, timeout_ms, park_ms=wait_ms)

    def _submit(
        self, event: _Event, response_cls: type[M], timeout_ms: int, park_ms: int | None = None
    ) -> M:
        """Queues `event` and waits for its answer. A fetch is parked up to `park_ms` (0: it
        is answered at once, with nothing when there is nothing after its offset)."""
        now_ms = _monotonic_ms()
        event.deadline_ms = now_ms + (timeout_ms if park_ms is None else park_ms)
        park_ms = park_ms or 0
        if self._failure is not None:
            return _error(response_cls, common_pb2.UNKNOWN_SERVER_ERROR, "controller failed")
        try:
            self._events.put_nowait(event)
        except queue.Full:
            return _error(
                response_cls,
                common_pb2.REQUEST_TIMED_OUT,
                f"the controller has {self.config.events_queue_max} requests queued; retry later",
            )
        if self._raft is not None:
            self._raft.wakeup()
        try:
            response = event.future.result(timeout=(timeout_ms + park_ms) / 1000)
        except TimeoutError:
            return _error(
                response_cls,
                common_pb2.REQUEST_TIMED_OUT,
                f"no answer within {timeout_ms} ms (a write may still commit)",
            )
        assert isinstance(response, response_cls), f"{type(response)} is not {response_cls}"
        return response

    # ---- controller thread -----------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._raft = RaftLog(self._raft_config, self._state)
        except BaseException as error:
            self._failure = error
            self._started.set()
            raise
        self._started.set()
        try:
            while not self._stopping.is_set():
                self._raft.poll(self._poll_timeout_ms())
                now_ms = _monotonic_ms()
                self._follow_raft_role()
                self._drain_events(now_ms)
                self._run_timers(now_ms)
                self._answer_fetches(now_ms)
        except BaseException as error:
            self._failure = error
            log.exception("controller thread failed; the node stops serving")
            raise
        finally:
            self._fail_everything("controller is shutting down")
            self._raft.close()

    def _poll_timeout_ms(self) -> int:
        if not self._events.empty():
            return 0
        return 10 if self._parked_fetches else POLL_IDLE_MS

    def _follow_raft_role(self) -> None:
        assert self._raft is not None
        status = self._raft.status()
        self._leader_id = status.leader_id
        role = self._role
        if role.role is Role.STANDBY:
            if status.is_leader:
                self._activate(status.term)
        elif not status.is_leader or status.term != role.epoch:
            self._deactivate(f"leadership moved (term {status.term}, leader {status.leader_id})")

    def _activate(self, term: int) -> None:
        assert self._raft is not None
        self._role = self._role.to_activating(term)
        log.info("node %d leads term %d; appending LEADER_CHANGE", self.config.node_id, term)
        records: tuple[Record, ...] = (NoOpRecord(),)
        if METADATA_VERSION_FEATURE not in self._state.image.features.levels:
            # The first controller of a new cluster bootstraps metadata.version (Kafka's rule), so
            # every snapshot opens with the version of the records that follow.
            records += (FeatureLevelRecord(METADATA_VERSION_FEATURE, METADATA_VERSION_LATEST),)
        barrier = QuorumBatch(BatchKind.LEADER_CHANGE, term, self.config.node_id, records)
        self._raft.append(barrier.encode(), lambda result, error: self._on_barrier(term, result))

    def _on_barrier(self, term: int, result: object) -> None:
        if self._role.role is not Role.ACTIVATING or self._role.epoch != term:
            return
        if not isinstance(result, Applied):
            self._deactivate(f"LEADER_CHANGE for term {term} did not land: {result}")
            return
        self._role = self._role.to_active()
        self._pending_image = self._state.image
        now_ms = _monotonic_ms()
        self._heartbeats.reset(self._state.image, now_ms)
        self._next_balance_ms = now_ms + self.config.leader_imbalance_check_interval_seconds * 1000
        log.info("node %d is the active controller (epoch %d)", self.config.node_id, term)

    def _deactivate(self, reason: str) -> None:
        was = self._role.role
        self._role = self._role.to_standby()
        self._pending_image = self._state.image
        inflight, self._inflight = self._inflight, []
        for event in inflight:
            # Their outcome is unknown here: they may still commit under the next controller.
            event.future.set_result(self._not_controller(event.response_cls, reason))
        log.info("node %d stops being %s: %s", self.config.node_id, was.value, reason)

    def _drain_events(self, now_ms: int) -> None:
        for _ in range(EVENTS_PER_POLL_MAX):
            if self._role.role is Role.ACTIVATING:
                return  # events wait until every earlier entry is applied
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            if now_ms > event.deadline_ms and event.kind != "fetch":
                continue  # its caller has already answered REQUEST_TIMED_OUT
            if self._role.role is Role.ACTIVE or (event.kind == "fetch" and event.allow_standby):
                self._handle(event, now_ms)
            else:
                event.future.set_result(self._not_controller(event.response_cls))

    def _handle(self, event: _Event, now_ms: int) -> None:
        try:
            if event.kind == "write":
                self._handle_write(event, now_ms)
            elif event.kind == "read":
                assert event.read is not None
                event.future.set_result(event.read(self._read_context()))
            else:
                self._parked_fetches.append(event)
        except InvariantError:
            raise
        except Exception as error:  # a bug in one handler must not take the controller down
            log.exception("handling a %s request failed", event.kind)
            event.future.set_result(
                _error(event.response_cls, common_pb2.UNKNOWN_SERVER_ERROR, str(error))
            )

    def _handle_write(self, event: _Event, now_ms: int) -> None:
        assert self._raft is not None and event.decide is not None
        context = DecideContext(
            image=self._pending_image,
            next_offset=self._pending_image.offset + 1,
            now_ms=now_ms,
            cluster_id=self.config.cluster_id,
            heartbeats=self._heartbeats,
        )
        result = event.decide(context)
        if not result.records:
            event.future.set_result(result.response)
            return
        self._pending_image = _replayed(self._pending_image, result.records, self._role.epoch)
        self._inflight.append(event)
        batch = QuorumBatch(
            BatchKind.RECORDS, self._role.epoch, self.config.node_id, result.records
        )
        response = result.response
        self._raft.append(
            batch.encode(),
            lambda applied, error: self._on_write_done(event, response, applied, error),
        )

    def _on_write_done(
        self, event: _Event, response: Message, applied: object, error: AppendError | None
    ) -> None:
        if event not in self._inflight:
            return  # answered NOT_CONTROLLER when this node stepped down
        self._inflight.remove(event)
        if not isinstance(applied, Applied) or error is not None:
            reason = error.name if error is not None else f"batch rejected: {applied}"
            event.future.set_result(self._not_controller(event.response_cls, reason))
            if self._role.role is not Role.STANDBY:
                self._deactivate(f"a write failed ({reason})")
            return
        event.future.set_result(response)
        if not self._inflight:
            # Nothing in flight: the pending image must now be exactly the committed one.
            assert self._pending_image.offset == self._state.image.offset
            self._pending_image = self._state.image

    def _run_timers(self, now_ms: int) -> None:
        if self._role.role is not Role.ACTIVE:
            return
        self._fence_expired_brokers(now_ms)
        self._balance_partition_leaders(now_ms)

    def _fence_expired_brokers(self, now_ms: int) -> None:
        expired = self._heartbeats.expired(self._pending_image, now_ms)
        if not expired:
            return
        log.info("fencing brokers %s: no heartbeat within the session timeout", expired)
        for broker_id in expired:
            self._heartbeats.remove(broker_id)
        self._write_internal(
            lambda ctx: _as_header_result(fence_expired_brokers(ctx.image, expired)), now_ms
        )

    def _balance_partition_leaders(self, now_ms: int) -> None:
        """Every `leader.imbalance.check.interval.seconds`, when `auto.leader.rebalance.enable`,
        moves leadership back to preferred replicas that can take it (Kafka's periodic task)."""
        if not self.config.auto_leader_rebalance_enable or now_ms < self._next_balance_ms:
            return
        self._next_balance_ms = now_ms + self.config.leader_imbalance_check_interval_seconds * 1000
        self._write_internal(
            lambda ctx: _as_header_result(balance_partition_leaders(ctx.image)), now_ms
        )

    def _write_internal(
        self, decide: Callable[[DecideContext], ControllerResult[Any]], now_ms: int
    ) -> None:
        """A write the controller decides for itself; nobody waits for its answer."""
        deadline_ms = now_ms + self.config.request_timeout_ms
        event = _Event("write", common_pb2.ResponseHeader, deadline_ms, Future(), decide=decide)
        self._handle(event, now_ms)

    def _answer_fetches(self, now_ms: int) -> None:
        if not self._parked_fetches:
            return
        waiting: list[_Event] = []
        for event in self._parked_fetches:
            if self._role.role is not Role.ACTIVE and not event.allow_standby:
                event.future.set_result(self._not_controller(event.response_cls))
            elif self._state.last_offset > event.fetch_after_offset or now_ms >= event.deadline_ms:
                event.future.set_result(self._fetch_response(event))
            else:
                waiting.append(event)
        self._parked_fetches = waiting

    def _fetch_response(self, event: _Event) -> Message:
        return fetch_response(self._state, event.fetch_after_offset, self.config)

    def _read_context(self) -> ReadContext:
        assert self._raft is not None
        return ReadContext(
            image=self._state.image,
            raft=self._raft.status(),
            config=self.config,
            active_controller_id=self.config.node_id,
        )

    def _not_controller(self, response_cls: type[Message], reason: str = "") -> Message:
        leader = self._leader_id if self._leader_id is not None else -1
        address = self.config.controller_listeners.get(leader, "") if leader >= 0 else ""
        message = f"node {self.config.node_id} is not the active controller"
        if leader >= 0:
            message += f"; the Raft leader is node {leader} at {address}"
        if reason:
            message += f" ({reason})"
        response = response_cls()
        header = _header_of(response)
        header.error_code = common_pb2.NOT_CONTROLLER
        header.error_message = message
        header.controller_id = leader
        header.controller_address = address
        return response

    def _fail_everything(self, reason: str) -> None:
        pending = list(self._parked_fetches)
        self._parked_fetches = []
        while True:
            try:
                pending.append(self._events.get_nowait())
            except queue.Empty:
                break
        for event in pending:
            if not event.future.done():
                event.future.set_result(self._not_controller(event.response_cls, reason))


def _replayed(image: MetadataImage, records: tuple[Record, ...], epoch: int) -> MetadataImage:
    return replay_all(image, records).apply(
        offset=image.offset + len(records), epoch=max(epoch, image.epoch)
    )


def _as_header_result(
    result: ControllerResult[None],
) -> ControllerResult[common_pb2.ResponseHeader]:
    return ControllerResult(result.records, common_pb2.ResponseHeader())


def _header_of(response: Message) -> common_pb2.ResponseHeader:
    if isinstance(response, common_pb2.ResponseHeader):
        return response
    header = response.header  # type: ignore[attr-defined]
    assert isinstance(header, common_pb2.ResponseHeader)
    return header


def _error(response_cls: type[M], code: int, message: str) -> M:
    response = response_cls()
    header = _header_of(response)
    header.error_code = code  # type: ignore[assignment]
    header.error_message = message
    header.controller_id = -1
    return response


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000
