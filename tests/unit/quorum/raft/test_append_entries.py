"""A follower keeps the entries it holds when the leader sends entries it already has.

pysyncobj's follower deleted every entry after `prevLogIdx` whenever it held more than the
message carried, even entries that match the leader's. That happens for real: a follower that
answers a stale request with a reset moves the leader's `nextIndex` back, the leader re-sends one
batch from there, and the follower threw away committed and applied entries beyond the batch
(seen at 100,000 partitions, with pysyncobj logging "truncating already-applied log entries").
Raft deletes only from the first entry that conflicts (Figure 2, AppendEntries step 3).

The messages here are built as the leader builds them and handed to the follower's transport on
its own thread, as the socket would.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykraft.quorum.raft import PySyncObjRaftLog
from pykraft.quorum.raft.journal import Entry

from .harness import (
    VoterThread,
    append_through_leader,
    free_voters,
    leader_of,
    start_voters,
    stop_voters,
    wait_applied,
)

PAYLOADS = [f"entry-{i:02d}".encode() for i in range(12)]


@pytest.fixture
def committed(tmp_path: Path) -> Iterator[tuple[VoterThread, VoterThread]]:
    """Three voters that applied PAYLOADS; yields (leader, a follower), and afterwards checks
    that the three still commit and apply what the leader appends."""
    nodes = start_voters(free_voters(3), tmp_path)
    try:
        acknowledged = append_through_leader(nodes, PAYLOADS)
        wait_applied(nodes, acknowledged)
        leader = leader_of(nodes)
        follower = next(node for node in nodes if node is not leader)
        yield leader, follower
        acknowledged += append_through_leader(nodes, [b"after-1", b"after-2"])
        wait_applied(nodes, acknowledged)
    finally:
        stop_voters(nodes)


def _entries(log: PySyncObjRaftLog) -> list[Entry]:
    return list(log._journal[:])


def _receive(log: PySyncObjRaftLog, sender: VoterThread, message: dict[str, Any]) -> Any:
    """Hands `message` to `log`'s transport as if `sender` sent it; returns the sender's node."""
    sender_id = sender.config.node_id
    node = next(node for node in log._node._SyncObj__otherNodes if node.node_id == sender_id)
    transport = log._storage.transport
    assert transport is not None
    transport._onMessageReceived(node, message)
    return node


def _deliver(follower: VoterThread, leader: VoterThread, message: dict[str, Any]) -> list[Entry]:
    """Hands `message` to the follower as if it came from the leader; returns its log after."""

    def receive(log: PySyncObjRaftLog) -> list[Entry]:
        _receive(log, leader, message)
        return _entries(log)

    return follower.run(receive)


def _append_entries(follower: VoterThread, prev: Entry, entries: list[Entry]) -> dict[str, Any]:
    status = follower.status()
    return {
        "type": "append_entries",
        "term": follower.journal.getCurrentTerm(),
        "commit_index": status.commit_index,
        "prevLogIdx": prev[1],
        "prevLogTerm": prev[2],
        "entries": entries,
    }


@pytest.mark.parametrize(
    ("prev_position", "count"),
    [(6, 2), (2, 0)],
    ids=["a batch re-sent from the middle", "a heartbeat from behind the end"],
)
def test_a_request_repeating_held_entries_leaves_the_entries_after_it(
    committed: tuple[VoterThread, VoterThread], prev_position: int, count: int
) -> None:
    leader, follower = committed
    before = follower.run(_entries)
    held = before[prev_position + 1 : prev_position + 1 + count]
    message = _append_entries(follower, before[prev_position], held)

    after = _deliver(follower, leader, message)

    assert after == before


def test_a_large_entry_repeated_in_parts_leaves_the_entries_after_it(
    committed: tuple[VoterThread, VoterThread],
) -> None:
    """pysyncobj sends an entry above its batch size in parts; the last part is planned too."""
    leader, follower = committed
    before = follower.run(_entries)
    middle = len(before) // 2
    data = pickle.dumps(before[middle])
    request = _append_entries(follower, before[middle - 1], [])
    del request["entries"]
    parts = [("start", data[:10]), ("process", data[10:20]), ("finish", data[20:])]

    for part, chunk in parts:
        after = _deliver(follower, leader, {**request, "transmission": part, "data": chunk})

    assert after == before


def test_the_leader_ignores_a_reset_below_what_the_follower_matched(
    committed: tuple[VoterThread, VoterThread],
) -> None:
    """A reset answer to a request the follower answered long ago must not send the leader back
    over entries it knows the follower holds (etcd's raft drops such stale rejections too)."""
    leader, follower = committed
    stale = {"type": "next_node_idx", "next_node_idx": 3, "reset": True, "success": False}

    def progress_after_stale_reset(log: PySyncObjRaftLog) -> tuple[int, int]:
        node = _receive(log, follower, stale)
        return log._node._SyncObj__raftMatchIndex[node], log._node._SyncObj__raftNextIndex[node]

    match_index, next_index = leader.run(progress_after_stale_reset)

    assert match_index > 3
    assert next_index > match_index


def test_a_batch_re_sent_to_the_end_is_neither_deleted_nor_added_again(
    committed: tuple[VoterThread, VoterThread], caplog: pytest.LogCaptureFixture
) -> None:
    """The follower holds exactly the entries sent and none after them. pysyncobj deleted them
    and appended them again, applied ones included, logging "truncating already-applied log
    entries" (the line bench/metadata_scale.py's 1,000,000-partition run printed once); now
    nothing is deleted."""
    leader, follower = committed
    before = follower.run(_entries)
    message = _append_entries(follower, before[3], before[4:])

    with caplog.at_level(logging.CRITICAL, logger="pysyncobj"):
        after = _deliver(follower, leader, message)

    assert after == before
    assert not [r for r in caplog.records if "already-applied" in r.getMessage()]
