"""The controller quorum's Raft log: a narrow, durable interface over pysyncobj.

Callers code against `RaftLog` (a Protocol) with their `StateMachine`; `PySyncObjRaftLog` is the
one implementation, and nothing else of pysyncobj shows through.
"""

from __future__ import annotations

from pykraft.quorum.raft.api import (
    AppendCallback,
    AppendError,
    RaftConfig,
    RaftLog,
    RaftStatus,
    StateMachine,
    VoterProgress,
)
from pykraft.quorum.raft.errors import (
    JournalCorruptError,
    RaftStorageError,
    SnapshotCorruptError,
)
from pykraft.quorum.raft.pysyncobj_log import PySyncObjRaftLog

__all__ = [
    "AppendCallback",
    "AppendError",
    "JournalCorruptError",
    "PySyncObjRaftLog",
    "RaftConfig",
    "RaftLog",
    "RaftStatus",
    "RaftStorageError",
    "SnapshotCorruptError",
    "StateMachine",
    "VoterProgress",
]
