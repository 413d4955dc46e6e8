"""A Raft group reduced to what a controller sees, for the controller simulation: one committed
log shared by every node, one leader per term, and a `SimRaftLog` per node implementing the
`RaftLog` Protocol over it. Faults are the simulation's to inject (see `SimRaft`)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass

from pykraft.quorum.batch import BatchKind, QuorumBatch
from pykraft.quorum.raft import AppendCallback, AppendError, RaftStatus, VoterProgress
from pykraft.quorum.state_machine import MetadataStateMachine


@dataclass(frozen=True)
class Entry:
    """An appended entry; `key` is unique in the run, `term` the term its leader believed in."""

    key: int
    node_id: int
    term: int
    payload: bytes


@dataclass(frozen=True)
class CommittedEntry:
    entry: Entry
    # True when a LEADER_CHANGE of a higher epoch precedes it in the log: a deposed controller's
    # batch, which must never apply.
    stale: bool


class SimRaft:
    """The shared log. The leader's appends wait in `uncommitted` until `commit` takes a prefix.
    On `elect`, a prefix of them commits, and each of the others is lost (its appender hears
    DISCARDED) or becomes a zombie: committed later, after a newer LEADER_CHANGE, as a deposed
    leader's entry can be. A node that still believes it leads an old term appends
    zombies or lost entries only."""

    def __init__(self, rng: random.Random, node_ids: list[int]) -> None:
        self.rng = rng
        self.node_ids = node_ids
        self.term = 0
        self.leader_id: int | None = None
        self.committed: list[CommittedEntry] = []
        self.uncommitted: list[Entry] = []
        self.zombies: list[Entry] = []
        self._lost: dict[int, list[int]] = {node_id: [] for node_id in node_ids}
        self._keys = itertools.count()
        self._leader_change_epoch_max = -1

    def elect(self, leader_id: int) -> None:
        self._commit_entries(self.rng.randint(0, len(self.uncommitted)))
        for entry in self.uncommitted:
            self._lose_or_keep(entry)
        self.uncommitted = []
        self.term += 1
        self.leader_id = leader_id

    def append(self, node_id: int, term: int, payload: bytes) -> int:
        entry = Entry(next(self._keys), node_id, term, payload)
        if node_id == self.leader_id and term == self.term:
            self.uncommitted.append(entry)
        else:
            self._lose_or_keep(entry)
        return entry.key

    def commit(self, count: int) -> None:
        self._commit_entries(min(count, len(self.uncommitted)))

    def commit_zombie(self) -> None:
        """Commits a zombie once a newer LEADER_CHANGE committed: before that it could only
        commit in log order, after the entries of its term that were lost, which Raft rules out."""
        ready = [e for e in self.zombies if e.term < self._leader_change_epoch_max]
        if ready:
            entry = self.rng.choice(ready)
            self.zombies.remove(entry)
            self._commit(entry)

    def take_lost(self, node_id: int) -> list[int]:
        lost, self._lost[node_id] = self._lost[node_id], []
        return lost

    def _lose_or_keep(self, entry: Entry) -> None:
        if self.rng.random() < 0.3:
            self.zombies.append(entry)
        else:
            self._lost[entry.node_id].append(entry.key)

    def _commit_entries(self, count: int) -> None:
        entries, self.uncommitted = self.uncommitted[:count], self.uncommitted[count:]
        for entry in entries:
            self._commit(entry)

    def _commit(self, entry: Entry) -> None:
        batch = QuorumBatch.decode(entry.payload)
        stale = batch.epoch < self._leader_change_epoch_max
        if batch.kind is BatchKind.LEADER_CHANGE:
            self._leader_change_epoch_max = max(self._leader_change_epoch_max, batch.epoch)
        self.committed.append(CommittedEntry(entry, stale))


ApplyObserver = Callable[[int, CommittedEntry, object, MetadataStateMachine], None]


class SimRaftLog:
    """One node's `RaftLog` over a `SimRaft`: appends go to the shared log as the leader this
    node believed in at its last poll; `poll` applies what committed since and runs callbacks."""

    def __init__(
        self,
        raft: SimRaft,
        node_id: int,
        state: MetadataStateMachine,
        observe_apply: ApplyObserver,
        *,
        snapshot: tuple[int, list[bytes]] | None = None,
    ) -> None:
        self._raft = raft
        self._node_id = node_id
        self._state = state
        self._observe_apply = observe_apply
        self.applied = 0
        if snapshot is not None:  # a restart from this node's last snapshot
            self.applied, data = snapshot
            state.restore(data)
        self.results: dict[int, object] = {}  # entry key -> what apply() returned here
        self._appended_keys: list[int | None] = []  # per append() call: the entry, if any
        self._in_flight: dict[int, AppendCallback] = {}
        self._outcomes: list[tuple[AppendCallback, object | None, AppendError | None]] = []
        self._status = self._read_status()
        self.closed = False

    def append(self, payload: bytes, callback: AppendCallback) -> None:
        key = None
        if self.closed:
            callback(None, AppendError.SHUTDOWN)
        elif not self._status.is_leader:
            self._outcomes.append((callback, None, AppendError.NOT_LEADER))
        else:
            key = self._raft.append(self._node_id, self._status.term, payload)
            self._in_flight[key] = callback
        self._appended_keys.append(key)

    def take_appended_keys(self) -> list[int | None]:
        """The entry of each append() since the last call (None: refused), in order."""
        keys, self._appended_keys = self._appended_keys, []
        return keys

    def poll(self, timeout_ms: int) -> None:
        assert not self.closed
        for committed in self._raft.committed[self.applied :]:
            result = self._state.apply(committed.entry.payload)
            self.applied += 1
            self.results[committed.entry.key] = result
            self._observe_apply(self._node_id, committed, result, self._state)
            callback = self._in_flight.pop(committed.entry.key, None)
            if callback is not None:
                self._outcomes.append((callback, result, None))
        for key in self._raft.take_lost(self._node_id):
            callback = self._in_flight.pop(key, None)
            if callback is not None:
                self._outcomes.append((callback, None, AppendError.DISCARDED))
        self._status = self._read_status()
        outcomes, self._outcomes = self._outcomes, []
        for callback, outcome, error in outcomes:
            callback(outcome, error)

    def wakeup(self) -> None:
        pass

    def status(self) -> RaftStatus:
        return self._status

    def close(self) -> None:
        self.closed = True
        for callback in self._in_flight.values():
            callback(None, AppendError.SHUTDOWN)
        self._in_flight.clear()

    def _read_status(self) -> RaftStatus:
        raft = self._raft
        voters = tuple(
            VoterProgress(node_id, f"sim-{node_id}:9093", None, True) for node_id in raft.node_ids
        )
        return RaftStatus(
            node_id=self._node_id,
            leader_id=raft.leader_id,
            term=raft.term,
            is_leader=raft.leader_id == self._node_id,
            commit_index=len(raft.committed),
            last_applied=self.applied,
            log_end_index=len(raft.committed) + len(raft.uncommitted),
            voters=voters,
        )
