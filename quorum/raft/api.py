"""The narrow interface of the controller's Raft log: what the controller codes against.

Nothing here knows pysyncobj; `pykraft.quorum.raft.pysyncobj_log.PySyncObjRaftLog` implements
`RaftLog`, and the controller simulation test has an in-memory one.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

# The largest Raft entry by default (see `RaftConfig.entry_bytes_max`).
ENTRY_BYTES_MAX_DEFAULT: Final = 16 * 1024 * 1024


class StateMachine(Protocol):
    """The replicated state, implemented by the controller.

    All three methods run on the thread that polls the `RaftLog`.
    """

    def apply(self, payload: bytes) -> object:
        """Applies one committed entry; entries arrive exactly in log order. The result goes to
        the append callback on the node that appended the entry."""
        ...

    def snapshot(self) -> Iterator[bytes]:
        """The whole state after the last applied entry, for log compaction, in bounded parts
        drawn one at a time (written to the snapshot file as they come, never joined): what
        they hold is fixed by the call, whatever applies later."""
        ...

    def restore(self, parts: Iterable[bytes]) -> None:
        """Replaces the whole state with a snapshot's parts, in the order `snapshot` made them
        (at start-up or when the leader sends one). Drawing a part may raise (a damaged file):
        the state must then stay as it was."""
        ...


@dataclass(frozen=True)
class RaftConfig:
    """Where this voter listens, who the other voters are, and the Raft timing.

    `voters` is the set a first start uses; once the node has run, the set persisted in its
    data directory (see `voters.py`) takes precedence. `listeners` travels with each voter
    through membership changes, so any voter can name every other one's gRPC listener.

    Raises ValueError on construction when the timing cannot work (pysyncobj would only assert).
    """

    node_id: int
    voters: Mapping[int, str]  # node id -> "host:port" of its Raft listener (includes self)
    data_dir: Path  # journal, quorum-state and snapshot files live here
    listeners: Mapping[int, str] = field(default_factory=dict)  # node id -> gRPC "host:port"
    # A silent leader is given up after a random wait in [min, max]; a killed one at once (its
    # connections close), though a lost-leader election that fails falls back to this wait.
    election_timeout_min_ms: int = 300
    election_timeout_max_ms: int = 600
    append_entries_period_ms: int = 50
    connection_retry_ms: int = 500
    leader_fallback_timeout_ms: int = 1500  # a leader that hears from no majority steps down
    compaction_min_entries: int = 5000
    compaction_min_time_ms: int = 600_000
    queue_entries_max: int = 10_000  # pending appends before QUEUE_FULL
    # The largest entry (TOO_LARGE beyond), and the bytes of entries one replication message
    # carries: pysyncobj cuts a larger entry into pieces and loses its tail (its last piece is
    # found by the entry's length, not the longer pickled one), killing the followers.
    entry_bytes_max: int = ENTRY_BYTES_MAX_DEFAULT

    def __post_init__(self) -> None:
        if self.node_id not in self.voters:
            raise ValueError(f"node {self.node_id} is not among the voters {sorted(self.voters)}")
        for node_id, address in self.voters.items():
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"voter {node_id}: {address!r} is not host:port")
        if len(set(self.voters.values())) != len(self.voters):
            raise ValueError(f"two voters share an address: {dict(self.voters)}")
        if self.election_timeout_min_ms <= 3 * self.append_entries_period_ms:
            raise ValueError("election_timeout_min_ms must exceed 3 * append_entries_period_ms")
        if self.election_timeout_max_ms <= self.election_timeout_min_ms:
            raise ValueError("election_timeout_max_ms must exceed election_timeout_min_ms")
        if self.leader_fallback_timeout_ms <= self.append_entries_period_ms:
            raise ValueError("leader_fallback_timeout_ms must exceed append_entries_period_ms")
        if self.append_entries_period_ms <= 0 or self.connection_retry_ms < 0:
            raise ValueError("append_entries_period_ms must be > 0, connection_retry_ms >= 0")
        if self.compaction_min_entries < 2 or self.compaction_min_time_ms <= 0:
            raise ValueError("compaction_min_entries must be >= 2, compaction_min_time_ms > 0")
        if self.queue_entries_max <= 0:
            raise ValueError("queue_entries_max must be > 0")
        if self.entry_bytes_max <= 0:
            raise ValueError("entry_bytes_max must be > 0")


class AppendError(enum.Enum):
    """Why an append did not commit. Only DISCARDED is ambiguous in time: it is reported once
    another entry took the appended entry's place in the log, which may be after a leader change."""

    NOT_LEADER = "not_leader"  # this node does not lead: nothing was appended, try the leader
    QUEUE_FULL = "queue_full"  # queue_entries_max appends are already waiting to commit
    LEADER_CHANGED = "leader_changed"  # leadership moved before the entry could be placed
    DISCARDED = "discarded"  # the entry was appended but overwritten by a newer leader's log
    DENIED = "denied"  # a voter change while another is uncommitted, or one that changes nothing
    SHUTDOWN = "shutdown"  # the log was closed before the outcome was known
    TOO_LARGE = "too_large"  # the entry is entry_bytes_max or more: nothing was appended


AppendCallback = Callable[[object | None, AppendError | None], None]  # (apply() result, error)


@dataclass(frozen=True)
class VoterProgress:
    node_id: int
    address: str
    match_index: int | None  # highest index known replicated there; None unless we lead
    connected: bool
    listener: str = ""  # its gRPC listener, when known


@dataclass(frozen=True)
class RaftStatus:
    node_id: int
    leader_id: int | None
    term: int
    is_leader: bool
    commit_index: int
    last_applied: int
    log_end_index: int
    voters: tuple[
        VoterProgress, ...
    ]  # progress as the leader sees it (match_index None on followers)


class RaftLog(Protocol):
    """The replicated log of one voter, used from one thread (the polling thread).

    What a caller may rely on: the `StateMachine` given to the log applies committed entries, in
    log order, only from inside `poll()`; each append's callback runs exactly once, from a later
    `poll()` (or from `close()`), after the entry was applied here or with the reason it was not.
    """

    def append(self, payload: bytes, callback: AppendCallback) -> None:
        """Appends `payload` when this node leads; never forwarded to another node."""
        ...

    def poll(self, timeout_ms: int) -> None:
        """Runs Raft for up to `timeout_ms` (less after `wakeup()`), applies what committed,
        then runs the append callbacks whose outcome is known."""
        ...

    def wakeup(self) -> None:
        """Makes a waiting `poll()` return soon. Thread-safe."""
        ...

    def status(self) -> RaftStatus:
        """The state as of the end of the last `poll()`. Thread-safe."""
        ...

    def close(self) -> None:
        """Releases the log; appends still in flight are called back with SHUTDOWN."""
        ...
