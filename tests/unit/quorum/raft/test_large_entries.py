"""Entries of several MB replicate promptly while the state machine is as slow as the
controller's (its apply of a 9,000-partition CreateTopics takes tens of ms, on the thread that
polls Raft). With pysyncobj's 64 KiB socket buffers each poll moved about 128 KiB of an entry, so
such entries crawled across the links while heartbeats queued behind them: 20 entries of 3 MB
did not commit within the harness's 15 s, and at 100,000 partitions followers deposed the active
controller again and again. `SOCKET_BUFFER_BYTES` lets an entry cross in one poll."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from .harness import ListStateMachine, append_through_leader, free_voters, start_voters, stop_voters

ENTRY_BYTES = 3_000_000
ENTRIES = 20
APPLY_S = 0.05  # a controller applying a large entry


def test_entries_of_several_mb_commit_promptly_beside_a_slow_state_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain_apply = ListStateMachine.apply

    def slow_apply(self: ListStateMachine, payload: bytes) -> object:
        time.sleep(APPLY_S)
        return plain_apply(self, payload)

    monkeypatch.setattr(ListStateMachine, "apply", slow_apply)
    chunk = random.Random(1).randbytes(4096)  # compresses as little as real records would
    payloads = [bytes([i]) + chunk * (ENTRY_BYTES // len(chunk)) for i in range(ENTRIES)]
    nodes = start_voters(free_voters(3), tmp_path)
    try:
        acknowledged = append_through_leader(nodes, payloads)  # each try within DEADLINE_S
        assert sorted(acknowledged) == sorted(payloads)
    finally:
        stop_voters(nodes)
