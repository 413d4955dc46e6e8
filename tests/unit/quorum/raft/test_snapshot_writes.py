"""Log compaction writes its snapshot on a thread of its own: the voter goes on replicating and
applying while the state machine's parts are drawn (a snapshot of 1,000,000 partitions takes
seconds to write, longer than an election timeout), and the snapshot holds the state as of the
entry it was asked for, whatever applied meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

from tests.waiting import wait_until

from .harness import (
    DEADLINE_S,
    ListStateMachine,
    VoterThread,
    append_through_leader,
    free_voters,
    raft_config,
    start_voters,
    stop_voters,
    wait_applied,
)


class HeldSnapshots(ListStateMachine):
    """A state machine whose snapshots, once the writer draws them, wait for `release`."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = threading.Event()
        self.release = threading.Event()

    def snapshot(self) -> Iterator[bytes]:
        applied = list(self.applied)  # the state as of now, drawn later

        def parts() -> Iterator[bytes]:
            self.writing.set()
            assert self.release.wait(DEADLINE_S), "the test never released the snapshot"
            yield from applied

        return parts()


def _compacted(node: VoterThread) -> bool:
    return node.run(lambda log: log._journal[0][1]) > 1


def test_the_voter_goes_on_while_its_snapshot_is_written(tmp_path: Path) -> None:
    voters = free_voters(1)
    voter = VoterThread(raft_config(1, voters, tmp_path, compaction_min_entries=4))
    state = voter.state_machine = HeldSnapshots()
    voter.start()
    try:
        acknowledged = append_through_leader([voter], [b"before-%d" % i for i in range(6)])
        wait_until(state.writing.is_set, "a snapshot is being written")
        # Before, the write ran inside poll(): nothing more committed until it ended.
        acknowledged += append_through_leader([voter], [b"during-%d" % i for i in range(6)])
        wait_applied([voter], acknowledged)
        assert not _compacted(voter)  # the journal keeps every entry until the file is written
        state.release.set()
        wait_until(lambda: _compacted(voter), "the snapshot written and the journal compacted")
    finally:
        state.release.set()
        stop_voters([voter])

    restarted = start_voters(voters, tmp_path, compaction_min_entries=4)
    try:
        wait_applied(restarted, acknowledged)
        assert restarted[0].state_machine.restores == 1
    finally:
        stop_voters(restarted)
