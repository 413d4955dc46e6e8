"""The controller's driver: the thread, the bounded request queue, the clock and the Raft log
around the I/O-free `ControllerCore` (`controller_core.py`, which holds every decision).

gRPC handlers never touch controller state. They submit a request (a write, a read or a metadata
fetch) to a bounded queue and wait on its future. The controller thread turns `ControllerLoop`:

    poll Raft (network I/O, commits applied, fsync, then append outcomes)
    -> step the core with each append outcome, then with the Raft status (leadership)
    -> step the core with queued requests (none while it activates)
    -> step the core with a Tick (timers: fencing, preferred leader rebalance; parked fetches)

and performs each step's `Output`: appends go to the Raft log, answers complete the futures,
and the next poll waits no longer than the core's next timer. `ControllerLoop` has no thread,
queue or clock of its own, so the simulation test drives the same code.
"""

from __future__ import annotations

import functools
import itertools
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import TypeVar

from google.protobuf.message import Message

from pykraft.proto import common_pb2, controller_pb2
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.controller_core import ControllerCore
from pykraft.quorum.events import (
    AppendDone,
    Decide,
    Event,
    FetchRequest,
    Output,
    RaftPolled,
    Read,
    ReadRequest,
    Request,
    Stop,
    Tick,
    WriteRequest,
)
from pykraft.quorum.metadata_fetch import FetchPlan
from pykraft.quorum.raft import (
    AppendCallback,
    AppendError,
    PySyncObjRaftLog,
    RaftConfig,
    RaftLog,
    RaftStatus,
)
from pykraft.quorum.replies import error_response

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)

POLL_IDLE_MS = 50
EVENTS_PER_POLL_MAX = 256
# How long one turn may spend deciding requests before it polls Raft again. Raft runs only inside
# poll(): a leader that decides for longer sends no heartbeat, and a follower that hears none
# within its election timeout (300 ms at least) deposes it. Several CreateTopics of 9,000
# partitions decided in one turn took 500-900 ms and livelocked the quorum at 100,000 partitions
# (every active controller's next write DISCARDED by the election it caused). One heartbeat
# period (RaftConfig.append_entries_period_ms), so a decision that starts before it runs out
# still ends well within the election timeout.
REQUESTS_MS_MAX_PER_TURN = 50
# A turn that keeps the controller thread busy this long (CPU) leaves Raft silent for half the
# followers' election timeout or more once the machine is loaded: logged with the node's role,
# so an election can be matched with the turns before it (whose thread, and how long).
SLOW_TURN_CPU_MS_MIN = 150
VOTER_CHANGE_RETRY_MS = 5  # how often a waiting leadership handover looks at the followers again
VOTER_CHANGES_QUEUED_MAX = 4  # voter changes go one at a time; more waiting is a confused operator

# Runs on the controller thread: starts one voter change on the log, which calls back once,
# and returns True; or returns False when it cannot start yet (a leadership handover waiting for
# a follower to match the log's end), to be tried again each turn until its deadline.
VoterChange = Callable[[PySyncObjRaftLog, AppendCallback], bool]
_QueuedVoterChange = tuple[VoterChange, Future[AppendError | None], int]  # ..., deadline_ms


class ControllerLoop:
    """Steps a `ControllerCore` and performs its `Output` on a `RaftLog`: appends go to the log,
    then `on_output` gets the whole Output (to send its answers). No thread, queue or clock of
    its own, so the simulation test drives the same code as the controller thread."""

    def __init__(
        self, core: ControllerCore, raft: RaftLog, on_output: Callable[[Output], None]
    ) -> None:
        self.core = core
        self.raft = raft
        self.wake_at_ms: int | None = None  # the core's next timer, as of the last step
        self._on_output = on_output
        self._done: list[AppendDone] = []  # append outcomes reported, not yet stepped

    def turn(
        self,
        poll_timeout_ms: int,
        clock_ms: Callable[[], int],
        next_request: Callable[[], Request | None],
    ) -> None:
        """One turn of the loop: poll the log; step the append outcomes, then its status; step
        up to EVENTS_PER_POLL_MAX requests for up to REQUESTS_MS_MAX_PER_TURN (none while the
        core activates); step a Tick. Requests left wait in the queue for the next turn."""
        self.raft.poll(poll_timeout_ms)
        now_ms = clock_ms()
        for outcome in self._take_done():
            self.step(outcome, now_ms)
        self.step(RaftPolled(self.raft.status()), now_ms)
        for _ in range(EVENTS_PER_POLL_MAX):
            if not self.core.accepts_requests:
                break  # requests wait until every earlier entry is applied
            if clock_ms() - now_ms >= REQUESTS_MS_MAX_PER_TURN:
                break  # Raft must run again before the followers' election timeout
            request = next_request()
            if request is None:
                break
            self.step(request, now_ms)
        self.step(Tick(), now_ms)

    def step(self, event: Event, now_ms: int) -> None:
        out = self.core.step(event, now_ms)
        for append in out.appends:
            self.raft.append(append.payload, self._on_done(append.append_id))
        self.wake_at_ms = out.wake_at_ms
        self._on_output(out)

    def stop(self, reason: str, queued: Iterable[Request], now_ms: int) -> None:
        """Answers parked and `queued` requests NOT_CONTROLLER, closes the log, then answers the
        writes in flight (their appends end with SHUTDOWN)."""
        self.step(Stop(reason), now_ms)
        for request in queued:
            self.step(request, now_ms)
        self.raft.close()
        for outcome in self._take_done():
            self.step(outcome, now_ms)

    def _on_done(self, append_id: int) -> AppendCallback:
        def on_done(result: object | None, error: AppendError | None) -> None:
            self._done.append(AppendDone(append_id, result, error))

        return on_done

    def _take_done(self) -> list[AppendDone]:
        done, self._done = self._done, []
        return done


class QuorumController:
    """Runs one controller's `ControllerCore` on its own thread; see the module docstring."""

    def __init__(self, config: ControllerConfig, raft_config: RaftConfig) -> None:
        self.config = config
        self._raft_config = raft_config
        self._core = ControllerCore(config, new_id=uuid.uuid4)
        self._requests: queue.Queue[Request] = queue.Queue(maxsize=config.events_queue_max)
        self._waiting: dict[int, Future[Message | FetchPlan | None]] = {}
        self._request_ids = itertools.count()
        self._raft: PySyncObjRaftLog | None = None
        self._voter_changes: queue.Queue[_QueuedVoterChange]
        self._voter_changes = queue.Queue(maxsize=VOTER_CHANGES_QUEUED_MAX)
        self._voter_changes_waiting: list[_QueuedVoterChange] = []  # controller thread only
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
    def core(self) -> ControllerCore:
        """For observers on other threads (the metrics): they read only what ControllerCore
        says other threads may (`role`, `state.image`, `raft_status`,
        `broker_metadata_offsets()`); everything else belongs to the controller thread."""
        return self._core

    @property
    def failed(self) -> BaseException | None:
        return self._failure

    def write(self, decide: Decide, response_cls: type[M], timeout_ms: int) -> M:
        """Decides with `decide` against the pending image; answers once its records commit."""
        return self._submit(
            lambda request_id, deadline_ms: WriteRequest(
                request_id, response_cls, deadline_ms, decide
            ),
            response_cls,
            timeout_ms,
        )

    def read(self, read: Read, response_cls: type[M], timeout_ms: int) -> M:
        return self._submit(
            lambda request_id, deadline_ms: ReadRequest(
                request_id, response_cls, deadline_ms, read
            ),
            response_cls,
            timeout_ms,
        )

    def fetch(
        self, after_offset: int, wait_ms: int, timeout_ms: int, *, allow_standby: bool = False
    ) -> controller_pb2.MetadataFetchResponse | FetchPlan:
        """A metadata fetch, parked up to `wait_ms` (0: answered at once, with nothing when
        there is nothing after `after_offset`): its plan, or the refusal to answer."""
        response_cls = controller_pb2.MetadataFetchResponse
        answer = self._answer_of(
            lambda request_id, deadline_ms: FetchRequest(
                request_id, response_cls, deadline_ms, after_offset, allow_standby
            ),
            response_cls,
            timeout_ms,
            wait_ms,
        )
        assert isinstance(answer, response_cls | FetchPlan), f"{type(answer)} answers a fetch"
        return answer

    def raft_status(self) -> RaftStatus | None:
        """The Raft state as of the last poll (None before the log is open)."""
        return None if self._raft is None else self._raft.status()

    def change_voters(self, change: VoterChange, timeout_ms: int) -> AppendError | None:
        """Runs `change` on the controller thread and waits for its outcome: None once the
        change committed, else why not. Raises TimeoutError after `timeout_ms` (the change may
        still commit)."""
        future: Future[AppendError | None] = Future()
        try:
            self._voter_changes.put_nowait((change, future, _monotonic_ms() + timeout_ms))
        except queue.Full:
            return AppendError.QUEUE_FULL
        if self._raft is not None:
            self._raft.wakeup()
        return future.result(timeout=timeout_ms / 1000)

    def write_nowait(self, decide: Decide, response_cls: type[Message], timeout_ms: int) -> bool:
        """Queues a write whose answer nobody waits for, without blocking (a gRPC callback may
        call it); False when it was not queued (the controller failed or stops, or its queue
        is full)."""
        queued = self._enqueue(
            lambda request_id, deadline_ms: WriteRequest(
                request_id, response_cls, deadline_ms, decide
            ),
            response_cls,
            _monotonic_ms() + timeout_ms,
        )
        return isinstance(queued, Future)

    def _submit(
        self,
        make: Callable[[int, int], Request],
        response_cls: type[M],
        timeout_ms: int,
        park_ms: int | None = None,
    ) -> M:
        """Queues the request `make(request_id, deadline_ms)` and waits for its answer."""
        response = self._answer_of(make, response_cls, timeout_ms, park_ms)
        assert isinstance(response, response_cls), f"{type(response)} is not {response_cls}"
        return response

    def _answer_of(
        self,
        make: Callable[[int, int], Request],
        response_cls: type[M],
        timeout_ms: int,
        park_ms: int | None,
    ) -> M | Message | FetchPlan:
        """`_submit`'s wait, whatever the answer's type (a fetch's is its plan)."""
        deadline_ms = _monotonic_ms() + (timeout_ms if park_ms is None else park_ms)
        park_ms = park_ms or 0
        future = self._enqueue(make, response_cls, deadline_ms)
        if not isinstance(future, Future):
            return future
        try:
            response = future.result(timeout=(timeout_ms + park_ms) / 1000)
        except TimeoutError:
            response = None
        if response is None:
            return error_response(
                response_cls,
                common_pb2.REQUEST_TIMED_OUT,
                f"no answer within {timeout_ms} ms (a write may still commit)",
            )
        return response

    def _enqueue(
        self, make: Callable[[int, int], Request], response_cls: type[M], deadline_ms: int
    ) -> Future[Message | FetchPlan | None] | M:
        """Queues `make(request_id, deadline_ms)`: the future of its answer, or the refusal
        to answer at once (the controller failed or stops, or its queue is full)."""
        if self._failure is not None:
            failed = "controller failed"
            return error_response(response_cls, common_pb2.UNKNOWN_SERVER_ERROR, failed)
        if self._stopping.is_set():
            stopping = "controller is shutting down"
            return error_response(response_cls, common_pb2.NOT_CONTROLLER, stopping)
        request_id = next(self._request_ids)
        future: Future[Message | FetchPlan | None] = Future()
        self._waiting[request_id] = future
        try:
            self._requests.put_nowait(make(request_id, deadline_ms))
        except queue.Full:
            del self._waiting[request_id]
            return error_response(
                response_cls,
                common_pb2.REQUEST_TIMED_OUT,
                f"the controller has {self.config.events_queue_max} requests queued; retry later",
            )
        if self._raft is not None:
            self._raft.wakeup()
        return future

    def _send_answers(self, out: Output) -> None:
        for answer in out.answers:
            self._waiting.pop(answer.request_id).set_result(answer.response)

    # ---- controller thread -----------------------------------------------------------------

    def _run(self) -> None:
        try:
            raft = PySyncObjRaftLog(self._raft_config, self._core.state)
        except BaseException as error:
            self._failure = error
            self._started.set()
            raise
        self._raft = raft
        loop = ControllerLoop(self._core, raft, self._send_answers)
        self._started.set()
        try:
            while not self._stopping.is_set():
                started_cpu_s, started_ms = time.thread_time(), _monotonic_ms()
                loop.turn(self._poll_timeout_ms(loop.wake_at_ms), _monotonic_ms, self._next_request)
                cpu_ms = (time.thread_time() - started_cpu_s) * 1000
                log_slow_turn(cpu_ms, _monotonic_ms() - started_ms, self._core)
                self._start_voter_changes(raft)
        except BaseException as error:
            self._failure = error
            log.exception("controller thread failed; the node stops serving")
            raise
        finally:
            self._fail_voter_changes()
            loop.stop("controller is shutting down", self._queued(), _monotonic_ms())

    def _start_voter_changes(self, raft: PySyncObjRaftLog) -> None:
        """Starts the queued changes; one that cannot start yet waits (DENIED at its deadline)."""
        while not self._voter_changes.empty():
            self._voter_changes_waiting.append(self._voter_changes.get_nowait())
        waiting, self._voter_changes_waiting = self._voter_changes_waiting, []
        for change, future, deadline_ms in waiting:
            if change(raft, functools.partial(_set_outcome, future)):
                continue
            if _monotonic_ms() >= deadline_ms:
                future.set_result(AppendError.DENIED)
            else:
                self._voter_changes_waiting.append((change, future, deadline_ms))

    def _fail_voter_changes(self) -> None:
        while not self._voter_changes.empty():
            self._voter_changes_waiting.append(self._voter_changes.get_nowait())
        for _, future, _ in self._voter_changes_waiting:
            future.set_result(AppendError.SHUTDOWN)
        self._voter_changes_waiting.clear()

    def _poll_timeout_ms(self, wake_at_ms: int | None) -> int:
        if not (self._requests.empty() and self._voter_changes.empty()):
            return 0
        timeout_ms = POLL_IDLE_MS
        if wake_at_ms is not None:
            timeout_ms = max(0, min(timeout_ms, wake_at_ms - _monotonic_ms()))
        if self._voter_changes_waiting:  # a handover waits for a follower: look again soon
            timeout_ms = min(timeout_ms, VOTER_CHANGE_RETRY_MS)
        return timeout_ms

    def _next_request(self) -> Request | None:
        try:
            return self._requests.get_nowait()
        except queue.Empty:
            return None

    def _queued(self) -> list[Request]:
        queued: list[Request] = []
        while True:
            try:
                queued.append(self._requests.get_nowait())
            except queue.Empty:
                return queued


def _set_outcome(
    future: Future[AppendError | None], _result: object | None, error: AppendError | None
) -> None:
    future.set_result(error)


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def log_slow_turn(cpu_ms: float, wall_ms: int, core: ControllerCore) -> None:
    """A warning when one turn used `SLOW_TURN_CPU_MS_MIN` of the thread's CPU or more."""
    if cpu_ms < SLOW_TURN_CPU_MS_MIN:
        return
    status = core.raft_status
    log.warning(
        "a turn held the controller thread for %.0f ms of CPU (%d ms in all) as %s in term %s "
        "at offset %d: Raft is silent meanwhile",
        cpu_ms,
        wall_ms,
        core.role.role.name,
        status.term if status is not None else "?",
        core.state.image.offset,
    )
