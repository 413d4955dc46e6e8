"""In-process Raft voters for the tests: each PySyncObjRaftLog is built and polled on its own
thread, and the test thread hands it work through `VoterThread.run`."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from pykraft.quorum.raft import AppendError, PySyncObjRaftLog, RaftConfig, RaftStatus
from pykraft.quorum.raft.journal import DurableJournal
from tests.ports import free_port
from tests.waiting import wait_until

T = TypeVar("T")
POLL_MS = 20
DEADLINE_S = 15.0
APPEND_ATTEMPTS_MAX = 5
RETRIABLE = {AppendError.NOT_LEADER, AppendError.DISCARDED, AppendError.LEADER_CHANGED}
# Slower than the defaults: the machine is shared, and a stalled thread must not look like a dead
# leader in the middle of a test.
TIMING: dict[str, Any] = {
    "election_timeout_min_ms": 400,
    "election_timeout_max_ms": 800,
    "leader_fallback_timeout_ms": 2500,
    "connection_retry_ms": 200,
}

Outcome = tuple[object | None, AppendError | None]


class ListStateMachine:
    """Appends every payload to a list; the snapshot is the list, one part per payload."""

    def __init__(self) -> None:
        self.applied: list[bytes] = []
        self.restores = 0

    def apply(self, payload: bytes) -> object:
        self.applied.append(payload)
        return len(self.applied)

    def snapshot(self) -> Iterator[bytes]:
        return iter(list(self.applied))

    def restore(self, parts: Iterable[bytes]) -> None:
        self.applied = list(parts)
        self.restores += 1


class VoterThread:
    """One voter: builds its PySyncObjRaftLog on its own thread and polls it until stopped."""

    def __init__(self, config: RaftConfig) -> None:
        self.config = config
        self.state_machine = ListStateMachine()
        self._tasks: queue.SimpleQueue[tuple[Callable[[PySyncObjRaftLog], Any], Future[Any]]]
        self._tasks = queue.SimpleQueue()
        self._started: Future[PySyncObjRaftLog] = Future()
        self._stopping = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(
            target=self._main, name=f"raft-{config.node_id}", daemon=True
        )

    @property
    def log(self) -> PySyncObjRaftLog:
        return self._started.result(timeout=DEADLINE_S)

    @property
    def journal(self) -> DurableJournal:
        return self.log._journal

    def start(self) -> VoterThread:
        self._thread.start()
        self._started.result(timeout=DEADLINE_S)  # raises what the constructor raised
        return self

    def stop(self) -> None:
        self._stopping.set()
        self.log.wakeup()
        self._thread.join(DEADLINE_S)
        assert not self._thread.is_alive(), f"voter {self.config.node_id} did not stop"
        if self._failure is not None:
            raise self._failure

    def status(self) -> RaftStatus:
        return self.log.status()

    def run(self, task: Callable[[PySyncObjRaftLog], T]) -> T:
        """Runs `task` on the voter's thread, between two polls, and returns its result."""
        future: Future[T] = Future()
        self._tasks.put((task, future))
        self.log.wakeup()
        return future.result(timeout=DEADLINE_S)

    def append(
        self, payloads: Sequence[bytes], acknowledged: list[bytes] | None = None
    ) -> list[Future[Outcome]]:
        """Appends all payloads in one go; each future gets its callback's arguments, and the
        payloads that succeed are added to `acknowledged` in the order their callbacks ran."""
        outcomes: list[Future[Outcome]] = [Future() for _ in payloads]
        sink = [] if acknowledged is None else acknowledged

        def append_all(log: PySyncObjRaftLog) -> None:
            for payload, outcome in zip(payloads, outcomes, strict=True):
                log.append(payload, _acknowledge(payload, outcome, sink))

        self.run(append_all)
        return outcomes

    def _main(self) -> None:
        try:
            log = PySyncObjRaftLog(self.config, self.state_machine)
        except BaseException as error:
            self._started.set_exception(error)
            return
        self._started.set_result(log)
        try:
            while not self._stopping.is_set():
                while not self._tasks.empty():
                    task, future = self._tasks.get()
                    future.set_result(task(log))
                log.poll(POLL_MS)
        except BaseException as error:
            self._failure = error
        finally:
            log.close()


def free_voters(count: int) -> dict[int, str]:
    """Addresses for `count` voters (pysyncobj needs every address before it binds, so port 0
    cannot be passed through); see tests/ports.py for why they avoid the ephemeral range."""
    return {i + 1: f"127.0.0.1:{free_port()}" for i in range(count)}


def raft_config(node_id: int, voters: dict[int, str], root: Path, **overrides: Any) -> RaftConfig:
    return RaftConfig(node_id, voters, root / f"voter-{node_id}", **{**TIMING, **overrides})


def start_voters(
    voters: dict[int, str], root: Path, node_ids: Iterable[int] | None = None, **overrides: Any
) -> list[VoterThread]:
    started: list[VoterThread] = []
    try:
        for node_id in voters if node_ids is None else node_ids:
            started.append(VoterThread(raft_config(node_id, voters, root, **overrides)).start())
    except BaseException:
        stop_voters(started)
        raise
    return started


def stop_voters(nodes: Iterable[VoterThread]) -> None:
    failures = []
    for node in nodes:
        try:
            node.stop()
        except BaseException as error:
            failures.append(error)
    if failures:
        raise failures[0]


def leader_of(nodes: Sequence[VoterThread]) -> VoterThread:
    """Waits until one node leads and every other node follows it, and returns it."""
    found: list[VoterThread] = []

    def agreed() -> bool:
        statuses = [node.status() for node in nodes]
        leaders = [node for node, s in zip(nodes, statuses, strict=True) if s.is_leader]
        if len(leaders) != 1:
            return False
        leader_id = leaders[0].config.node_id
        found[:] = leaders
        return all(s.leader_id == leader_id for s in statuses)

    try:
        wait_until(agreed, "the voters agree on a leader")
    except AssertionError as error:
        statuses = {node.config.node_id: node.status() for node in nodes}
        raise AssertionError(f"{error}; their statuses: {statuses}") from None
    return found[0]


def append_through_leader(nodes: Sequence[VoterThread], payloads: Sequence[bytes]) -> list[bytes]:
    """Appends the payloads in order through the leader and waits until all are acknowledged,
    appending again those that a leader change failed (they were not committed). Returns the
    payloads in the order the leader acknowledged them, which is the log order."""
    acknowledged: list[bytes] = []
    pending = list(payloads)
    for _ in range(APPEND_ATTEMPTS_MAX):
        outcomes = leader_of(nodes).append(pending, acknowledged)
        errors = [outcome.result(timeout=DEADLINE_S)[1] for outcome in outcomes]
        assert set(errors) <= RETRIABLE | {None}, errors
        pending = [p for p, error in zip(pending, errors, strict=True) if error is not None]
        if not pending:
            assert sorted(acknowledged) == sorted(payloads)
            return acknowledged
    raise AssertionError(f"{len(pending)} appends still failing after {APPEND_ATTEMPTS_MAX} tries")


def _acknowledge(
    payload: bytes, outcome: Future[Outcome], acknowledged: list[bytes]
) -> Callable[[object | None, AppendError | None], None]:
    def on_outcome(result: object | None, error: AppendError | None) -> None:
        if error is None:
            acknowledged.append(payload)
        outcome.set_result((result, error))

    return on_outcome


def wait_applied(nodes: Iterable[VoterThread], expected: list[bytes]) -> None:
    for node in nodes:
        machine = node.state_machine
        wait_until(
            lambda: machine.applied == expected,  # noqa: B023 (used before the next iteration)
            f"voter {node.config.node_id} applied all {len(expected)} entries",
        )
