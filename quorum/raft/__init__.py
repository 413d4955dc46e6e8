"""The controller quorum's Raft log: a narrow, durable interface over pysyncobj.

Callers use `RaftLog` with their `StateMachine`; nothing else of pysyncobj shows through.
"""

from __future__ import annotations

from pykraft.quorum.raft.api import (
    AppendCallback,
    AppendError,
    RaftConfig,
    RaftStatus,
    StateMachine,
    VoterProgress,
)
from pykraft.quorum.raft.errors import (
    JournalCorruptError,
    RaftStorageError,
    SnapshotCorruptError,
)
from pykraft.quorum.raft.pysyncobj_log import RaftLog

__all__ = [
    "AppendCallback",
    "AppendError",
    "JournalCorruptError",
    "RaftConfig",
    "RaftLog",
    "RaftStatus",
    "RaftStorageError",
    "SnapshotCorruptError",
    "StateMachine",
    "VoterProgress",
]
