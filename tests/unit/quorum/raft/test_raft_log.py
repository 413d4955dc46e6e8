"""PySyncObjRaftLog with real sockets and files: voters run in this process, each on its own
thread."""

from __future__ import annotations

import functools
import pickle
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from pykraft.quorum.raft import (
    AppendCallback,
    AppendError,
    JournalCorruptError,
    PySyncObjRaftLog,
    RaftConfig,
    SnapshotCorruptError,
)
from pykraft.quorum.raft.journal import DurableJournal
from pykraft.quorum.raft.snapshot_file import SNAPSHOT_FILE_NAME, write_snapshot_file
from tests.waiting import wait_until

from .harness import (
    DEADLINE_S,
    ListStateMachine,
    VoterThread,
    append_through_leader,
    free_voters,
    leader_of,
    raft_config,
    start_voters,
    stop_voters,
    wait_applied,
)

NO_OP_COMMAND = b"\x01"  # pysyncobj's no-op entry: never reaches the state machine


def _payloads(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i:03d}".encode() for i in range(count)]


def _poll_until(log: PySyncObjRaftLog, condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        log.poll(20)


# ---- one voter, on the test thread -------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"node_id": 4}, "not among the voters"),
        ({"voters": {1: "no-port"}}, "host:port"),
        ({"election_timeout_min_ms": 150}, "3 \\* append_entries_period_ms"),
        ({"election_timeout_max_ms": 300}, "must exceed election_timeout_min_ms"),
        ({"compaction_min_entries": 1}, "compaction_min_entries"),
    ],
)
def test_config_refuses_what_pysyncobj_cannot_run(
    tmp_path: Path, overrides: dict[str, object], message: str
) -> None:
    fields: dict[str, object] = {"node_id": 1, "voters": {1: "127.0.0.1:1"}, "data_dir": tmp_path}
    with pytest.raises(ValueError, match=message):
        RaftConfig(**{**fields, **overrides})  # type: ignore[arg-type]


def test_a_voter_without_quorum_refuses_appends_and_close_fails_the_rest(tmp_path: Path) -> None:
    log = PySyncObjRaftLog(raft_config(1, free_voters(3), tmp_path), ListStateMachine())
    outcomes: list[tuple[object, AppendError | None]] = []
    log.append(b"x", lambda result, error: outcomes.append((result, error)))
    assert outcomes == []  # callbacks run from poll(), never from append()
    log.poll(1000)
    assert outcomes == [(None, AppendError.NOT_LEADER)]
    status = log.status()
    assert (status.is_leader, status.leader_id, status.log_end_index) == (False, None, 1)
    assert all(voter.match_index is None for voter in status.voters)
    log.close()
    log.append(b"late", lambda result, error: outcomes.append((result, error)))
    assert outcomes[-1] == (None, AppendError.SHUTDOWN)


def test_a_taken_port_is_an_os_error_and_leaves_nothing_open(tmp_path: Path) -> None:
    voters = free_voters(3)
    host, port = voters[1].rsplit(":", 1)
    with socket.socket() as squatter:
        squatter.bind((host, int(port)))
        squatter.listen()
        with pytest.raises(OSError, match="cannot listen for Raft on"):
            PySyncObjRaftLog(raft_config(1, voters, tmp_path), ListStateMachine())
    PySyncObjRaftLog(raft_config(1, voters, tmp_path), ListStateMachine()).close()


def test_a_damaged_snapshot_stops_the_start(tmp_path: Path) -> None:
    config = raft_config(1, free_voters(3), tmp_path)
    config.data_dir.mkdir()
    (config.data_dir / SNAPSHOT_FILE_NAME).write_bytes(b"PKRSNAP\x00" + b"\x00" * 40)
    with pytest.raises(SnapshotCorruptError):
        PySyncObjRaftLog(config, ListStateMachine())


def test_a_compacted_journal_without_its_snapshot_stops_the_start(tmp_path: Path) -> None:
    config = raft_config(1, free_voters(3), tmp_path)
    config.data_dir.mkdir()
    journal = DurableJournal(config.data_dir)
    journal.add(NO_OP_COMMAND, 7, 1)
    journal._destroy()
    with pytest.raises(JournalCorruptError, match=r"no .*raft-snapshot"):
        PySyncObjRaftLog(config, ListStateMachine())


def test_a_compaction_cut_short_by_a_crash_keeps_the_later_entries(tmp_path: Path) -> None:
    """The snapshot (entries up to 6) was renamed into place, the journal (1..10) not compacted
    yet: pysyncobj alone would drop entries 7..10 at start-up."""
    config = raft_config(1, free_voters(3), tmp_path)
    config.data_dir.mkdir()
    journal = DurableJournal(config.data_dir)
    for index in range(1, 11):
        journal.add(NO_OP_COMMAND, index, 1)
    journal._destroy()
    raft_data = pickle.dumps(((NO_OP_COMMAND, 6, 1), (NO_OP_COMMAND, 5, 1), set()))
    snapshot_state = ListStateMachine()
    snapshot_state.applied = [b"from-snapshot"]
    write_snapshot_file(config.data_dir / SNAPSHOT_FILE_NAME, raft_data, snapshot_state.snapshot())

    state_machine = ListStateMachine()
    log = PySyncObjRaftLog(config, state_machine)
    try:
        _poll_until(log, lambda: state_machine.restores == 1, "the snapshot is loaded")
        assert state_machine.applied == [b"from-snapshot"]
        assert [index for _, index, _ in log._journal[:]] == [5, 6, 7, 8, 9, 10]
        assert log.status().log_end_index == 10 and log.status().last_applied == 6
    finally:
        log.close()


def test_an_entry_of_entry_bytes_max_or_more_is_refused(tmp_path: Path) -> None:
    state_machine = ListStateMachine()
    config = raft_config(1, free_voters(1), tmp_path, entry_bytes_max=1024)
    log = PySyncObjRaftLog(config, state_machine)
    try:
        _poll_until(log, lambda: log.status().is_leader, "the lone voter leads")
        outcomes: list[AppendError | None] = []
        log.append(b"x" * 1024, lambda result, error: outcomes.append(error))
        log.append(b"y" * 1023, lambda result, error: outcomes.append(error))
        _poll_until(log, lambda: len(outcomes) == 2, "both answered")
        assert outcomes == [AppendError.TOO_LARGE, None]
        assert state_machine.applied == [b"y" * 1023]
    finally:
        log.close()


def test_a_lone_voter_acknowledges_only_what_its_journal_synced(tmp_path: Path) -> None:
    """With one voter nothing is ever sent, so only poll()'s flush-before-callbacks can make
    the entry durable before its acknowledgement."""
    state_machine = ListStateMachine()
    log = PySyncObjRaftLog(raft_config(1, free_voters(1), tmp_path), state_machine)
    try:
        _poll_until(log, lambda: log.status().is_leader, "the lone voter leads")
        seen: list[tuple[AppendError | None, bool, int, int]] = []

        def on_outcome(result: object, error: AppendError | None) -> None:
            index = log._journal[-1][1]
            seen.append((error, log._journal.dirty, log._journal.durable_end_index, index))

        for payload in _payloads("lone", 5):
            log.append(payload, on_outcome)
        _poll_until(log, lambda: len(seen) == 5, "all five are acknowledged")
        for error, dirty, durable_end_index, index in seen:
            assert error is None and not dirty and durable_end_index >= index
        assert state_machine.applied == _payloads("lone", 5)
    finally:
        log.close()


# ---- three voters -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[VoterThread]]:
    nodes = start_voters(free_voters(3), tmp_path_factory.mktemp("cluster"))
    try:
        yield nodes
    finally:
        stop_voters(nodes)


def _applied_now(nodes: list[VoterThread]) -> list[bytes]:
    """What every voter applied, once they agree (tests leave the cluster quiet)."""
    expected = list(nodes[0].state_machine.applied)
    wait_applied(nodes, expected)
    return expected


def test_leader_appends_apply_in_the_same_order_on_every_voter(cluster: list[VoterThread]) -> None:
    before = _applied_now(cluster)
    acknowledged = append_through_leader(cluster, _payloads("order", 40))
    wait_applied(cluster, before + acknowledged)
    leader = leader_of(cluster)
    status = leader.status()
    assert status.commit_index == status.log_end_index and status.last_applied >= 40

    def every_voter_matches() -> bool:  # a commit waits for a majority's answers, not all
        voters = leader.status().voters
        return all(v.connected and v.match_index == status.log_end_index for v in voters)

    wait_until(every_voter_matches, "the leader hears every voter hold its log")
    for follower in (node for node in cluster if node is not leader):
        follower_status = follower.status()
        assert follower_status.term == status.term
        assert all(v.match_index is None for v in follower_status.voters)


def test_entries_larger_than_a_replication_message_reach_every_voter(
    cluster: list[VoterThread],
) -> None:
    """pysyncobj cuts an entry of at least `appendEntriesBatchSizeBytes` into pieces and marks
    the last by the entry's own length, not its pickled one (protocol 2 pickles bytes >= 0x80
    in two bytes each): a follower then unpickled a cut entry and its Raft thread died with
    EOFError (a CreateTopics of 90 topics x 100 partitions, a 300 KB entry, killed both
    followers). Entries up to `RAFT_ENTRY_BYTES_MAX` now travel whole."""
    before = _applied_now(cluster)
    large = [bytes(range(256)) * 400 + bytes([i]) for i in range(2)]  # 100 KiB each
    acknowledged = append_through_leader(cluster, large)
    assert acknowledged == large
    wait_applied(cluster, before + acknowledged)


def test_a_follower_refuses_appends_instead_of_forwarding(cluster: list[VoterThread]) -> None:
    before = _applied_now(cluster)
    leader = leader_of(cluster)
    follower = next(node for node in cluster if node is not leader)
    refused = follower.append([b"sent-to-a-follower"])[0]
    assert refused.result(timeout=DEADLINE_S) == (None, AppendError.NOT_LEADER)
    acknowledged = append_through_leader(cluster, [b"sent-to-the-leader"])
    wait_applied(cluster, before + acknowledged)  # the refused payload is nowhere


def test_a_command_left_in_a_former_leaders_queue_is_not_forwarded(
    cluster: list[VoterThread],
) -> None:
    """pysyncobj forwards to the leader a command it finds queued on a follower (one appended
    while this node still led); the transport answers it with NOT_LEADER instead. The queue is
    filled here past append()'s own leadership check, as a lost leadership would leave it."""
    before = _applied_now(cluster)
    leader = leader_of(cluster)
    follower = next(node for node in cluster if node is not leader)
    outcome: Future[tuple[object, AppendError | None]] = Future()

    def queue_behind_the_leadership_check(log: PySyncObjRaftLog) -> None:
        log._in_flight[-1] = lambda result, error: outcome.set_result((result, error))
        on_outcome = functools.partial(log._on_outcome, -1, time.perf_counter())
        log._node.apply_payload(b"queued-on-a-follower", callback=on_outcome)

    assert follower.status().leader_id == leader.config.node_id
    follower.run(queue_behind_the_leadership_check)
    assert outcome.result(timeout=DEADLINE_S) == (None, AppendError.NOT_LEADER)
    acknowledged = append_through_leader(cluster, [b"sent-to-the-leader-too"])
    wait_applied(cluster, before + acknowledged)  # the queued payload is nowhere


def test_callbacks_run_once_the_entry_is_on_disk_on_a_majority(
    cluster: list[VoterThread], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Followers get a slow disk: if they acknowledged before their flush, the leader would
    commit and call back while their journals still miss the entry."""
    before = _applied_now(cluster)
    leader = leader_of(cluster)
    leader_journal = leader.journal
    journals = [node.journal for node in cluster]
    real_flush = DurableJournal.flush

    def slow_follower_flush(journal: DurableJournal) -> None:
        if journal.dirty and journal is not leader_journal:
            time.sleep(0.03)
        real_flush(journal)

    monkeypatch.setattr(DurableJournal, "flush", slow_follower_flush)
    seen: list[tuple[AppendError | None, bool, int, list[int]]] = []

    def observe(payload: bytes) -> AppendCallback:
        def on_outcome(result: object, error: AppendError | None) -> None:
            index = next(i for command, i, _ in reversed(leader_journal[:]) if payload in command)
            durable = [journal.durable_end_index for journal in journals]
            seen.append((error, leader_journal.dirty, index, durable))

        return on_outcome

    payloads = _payloads("durable", 8)
    for count, payload in enumerate(payloads, 1):  # one at a time: each waits for its flushes
        callback = observe(payload)
        leader.run(lambda log: log.append(payload, callback))  # noqa: B023 (runs before the next)
        wait_until(lambda: len(seen) == count, "the append is answered")  # noqa: B023
    for error, leader_dirty, index, durable in seen:
        assert error is None and not leader_dirty
        assert sum(end >= index for end in durable) >= 2, (index, durable)
    wait_applied(cluster, before + payloads)


# ---- restarts ----------------------------------------------------------------------------------


def test_a_full_quorum_restart_replays_every_acknowledged_entry(tmp_path: Path) -> None:
    voters = free_voters(3)
    nodes = start_voters(voters, tmp_path)
    try:
        acknowledged = append_through_leader(nodes, _payloads("restart", 30))
        wait_applied(nodes, acknowledged)
        terms = {node.config.node_id: node.status().term for node in nodes}
    finally:
        stop_voters(nodes)

    restarted = start_voters(voters, tmp_path)
    try:
        for node in restarted:
            assert node.journal.getCurrentTerm() >= terms[node.config.node_id]
        wait_applied(restarted, acknowledged)
        assert all(node.status().term >= terms[node.config.node_id] for node in restarted)
        more = append_through_leader(restarted, [b"after-the-restart"])
        wait_applied(restarted, acknowledged + more)
    finally:
        stop_voters(restarted)


def _compacted(node: VoterThread) -> bool:
    return node.journal[0][1] > 1


def test_compaction_then_a_full_restart_restores_the_snapshots(tmp_path: Path) -> None:
    voters = free_voters(3)
    nodes = start_voters(voters, tmp_path, compaction_min_entries=10)
    try:
        acknowledged = append_through_leader(nodes, _payloads("compact", 45))
        wait_applied(nodes, acknowledged)
        wait_until(lambda: all(_compacted(node) for node in nodes), "every voter compacted")
    finally:
        stop_voters(nodes)

    restarted = start_voters(voters, tmp_path, compaction_min_entries=10)
    try:
        wait_applied(restarted, acknowledged)
        assert all(node.state_machine.restores >= 1 for node in restarted)
    finally:
        stop_voters(restarted)


def test_a_voter_that_missed_the_compacted_entries_gets_the_snapshot(tmp_path: Path) -> None:
    voters = free_voters(3)
    nodes = start_voters(voters, tmp_path, node_ids=[1, 2], compaction_min_entries=10)
    try:
        acknowledged = append_through_leader(nodes, _payloads("install", 45))
        wait_until(lambda: _compacted(leader_of(nodes)), "the leader compacted")
        nodes += start_voters(voters, tmp_path, node_ids=[3], compaction_min_entries=10)
        wait_applied(nodes, acknowledged)
        assert nodes[2].state_machine.restores == 1 and _compacted(nodes[2])
        assert (nodes[2].config.data_dir / SNAPSHOT_FILE_NAME).exists()
    finally:
        stop_voters(nodes)
