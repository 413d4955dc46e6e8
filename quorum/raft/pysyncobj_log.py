"""`RaftLog` (see `api.py`) on pysyncobj 0.3.17; with `pysyncobj_storage.py`, the only modules
that import pysyncobj.

pysyncobj replicates and elects well but does not make anything durable before it answers
(its issues #84 and #201). This module closes those gaps without forking it:

- Journal. SyncObj builds its journal inside `__init__` from the module-level function
  `pysyncobj.syncobj.createJournal` and keeps it in a private attribute; it has no parameter to
  inject one. So this module replaces that function (once, at import) by one that hands SyncObj
  the `DurableJournal` the RaftLog being built opened in its data directory. Term and vote are
  then stored with fsync before pysyncobj sends the message that reflects them. The same way,
  `pysyncobj.syncobj.Serializer` is replaced by a subclass that writes snapshots on a thread
  and closes the files it sends.
- Persist before send. The transport (`transportClass=`) flushes the journal before every
  message, so a follower's acknowledgement, and the leader's append request that lets
  followers acknowledge, only leave once the entries they cover are on disk. The leader counts
  itself toward the commit without persisting; that is safe here because its entries were
  flushed before they were sent to anyone.
- Raft's AppendEntries rule. The transport plans each append request before pysyncobj handles
  it (`append_entries.py`), so a follower deletes entries only from the first conflicting one.
- Persist before acknowledge. Append outcomes that pysyncobj reports during a tick are
  collected; `poll()` runs the callbacks only after the ticks return and the journal is flushed.
- Snapshots. The `serializer`/`deserializer` hooks write and read our own checked snapshot
  file (fsynced; its rename is made durable by the journal before compaction drops entries),
  chunk by chunk; the write runs on a thread of its own, so polling goes on meanwhile.
- No forwarding. pysyncobj forwards a follower's command to the leader; here a follower's
  append fails with NOT_LEADER, and the transport refuses to forward a command queued before
  this node lost the leadership.
- Voter changes. Dynamic membership is on: `add_voter`/`remove_voter` append pysyncobj's
  membership entries (one change at a time; each voter's node id and gRPC listener travel with
  it as attributes of its pysyncobj node), and the set each poll ends with is persisted
  (`voters.py`) so a restart uses it rather than the configured one.
- Elections. `poll()` reads what arrived before pysyncobj's tick judges its peers, so a
  voter whose thread was busy does not take a live leader for a dead one; and a follower
  whose connection to the leader closes calls an election at once (the transport), so a
  killed leader costs no election timeout.
- Fail-stop. pysyncobj logs and ignores a snapshot that cannot be written (retrying every
  tick) or loaded (going on without the state); here the failure is kept, nothing more is sent,
  and `poll()` raises.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import pickle
import threading
import time
from pathlib import Path
from typing import Any

from prometheus_client import Histogram
from pysyncobj import _RAFT_STATE, FAIL_REASON, SyncObj, SyncObjConf, SyncObjException, replicated
from pysyncobj.node import TCPNode

from pykraft.quorum.raft.api import (
    AppendCallback,
    AppendError,
    RaftConfig,
    RaftStatus,
    StateMachine,
    VoterProgress,
)
from pykraft.quorum.raft.errors import JournalCorruptError, RaftStorageError
from pykraft.quorum.raft.journal import JOURNAL_FILE_NAME, DurableJournal
from pykraft.quorum.raft.pysyncobj_storage import DurableTransport, Storage, building, node_id_of
from pykraft.quorum.raft.snapshot_file import SNAPSHOT_FILE_NAME, read_raft_data
from pykraft.quorum.raft.voters import Voter, with_persisted_voters, write_voters
from pykraft.server_common.durable_files import make_directory_durably

# pysyncobj drops a connection that received nothing for this long; links between followers
# are idle, so a short value only makes them reconnect more often. pysyncobj's default.
CONNECTION_TIMEOUT_MS_MIN = 3500
# The kernel buffers of each Raft connection (SO_SNDBUF and SO_RCVBUF; Linux caps them at
# net.core.wmem_max and rmem_max). pysyncobj's 64 KiB moved a large entry about 128 KiB per
# poll of each side, so a 3 MB entry (a CreateTopics of 90,000 partitions) took dozens of
# controller turns to cross while the heartbeats queued behind it, and followers started
# elections: in process, 20 entries of 3 MB did not commit within 15 s with 64 KiB and took
# 5.1 s with 4 MiB, with no election.
SOCKET_BUFFER_BYTES = 4 * 1024 * 1024

_ERRORS: dict[int, AppendError | None] = {
    FAIL_REASON.SUCCESS: None,
    FAIL_REASON.QUEUE_FULL: AppendError.QUEUE_FULL,
    FAIL_REASON.MISSING_LEADER: AppendError.NOT_LEADER,
    FAIL_REASON.NOT_LEADER: AppendError.NOT_LEADER,
    FAIL_REASON.LEADER_CHANGED: AppendError.LEADER_CHANGED,
    FAIL_REASON.DISCARDED: AppendError.DISCARDED,
    FAIL_REASON.REQUEST_DENIED: AppendError.DENIED,  # voter changes only
}

_Outcome = tuple[AppendCallback, object | None, AppendError | None]

# Kafka's raft-metrics commit-latency, as a histogram in seconds: from an append on the leader to
# its commit (on disk on a majority) and apply here.
RAFT_COMMIT_LATENCY = Histogram(
    "kafka_server_raft_metrics_commit_latency_seconds",
    "Time from a Raft append on the leader to its commit.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)


class _PySyncObjNode(SyncObj):  # type: ignore[misc]
    """pysyncobj's Raft node with a single replicated method.

    It has no replicated attributes: the state is the StateMachine's and reaches snapshots
    through the serializer hooks. `_pykraft_storage` is set before `SyncObj.__init__` because
    SyncObj treats attributes that exist then as its own, never as replicated state.
    """

    def __init__(self, config: RaftConfig, storage: Storage) -> None:
        self._pykraft_storage = storage
        nodes = {node_id: _node_of(config, node_id) for node_id in config.voters}
        others = [node for node_id, node in nodes.items() if node_id != config.node_id]
        super().__init__(
            nodes[config.node_id],
            others,
            conf=_pysyncobj_conf(config, storage),
            transportClass=functools.partial(DurableTransport, storage=storage),
        )

    @replicated  # type: ignore[untyped-decorator]
    def apply_payload(self, payload: bytes) -> object:
        return self._pykraft_storage.state_machine.apply(payload)


def _node_of(config: RaftConfig, node_id: int) -> Any:
    """pysyncobj's node for a voter; its attributes are pickled into membership entries and
    snapshots, which is how every voter learns the others' node ids and gRPC listeners."""
    return _tcp_node(Voter(node_id, config.voters[node_id], config.listeners.get(node_id, "")))


def _tcp_node(voter: Voter) -> Any:
    return TCPNode(voter.address, node_id=voter.node_id, listener=voter.listener)


def _voter_of(node: Any) -> Voter:
    return Voter(node_id_of(node), node.address, getattr(node, "listener", ""))


def _pysyncobj_conf(config: RaftConfig, storage: Storage) -> Any:
    address = config.voters[config.node_id]
    return SyncObjConf(
        autoTick=False,
        # Sends each append at once (about 1 ms per commit, not a 100 ms batch) and gives the
        # node the pipe notifier that wakeup() uses.
        appendEntriesUseBatch=False,
        useFork=False,
        dynamicMembershipChange=True,
        # Without a leader, fail at once (NOT_LEADER) instead of queueing for the next leader.
        commandsWaitLeader=False,
        commandsQueueSize=config.queue_entries_max,
        raftMinTimeout=config.election_timeout_min_ms / 1000,
        raftMaxTimeout=config.election_timeout_max_ms / 1000,
        appendEntriesPeriod=config.append_entries_period_ms / 1000,
        # Above every entry append() accepts, so none is ever cut into pieces (see RaftConfig).
        appendEntriesBatchSizeBytes=config.entry_bytes_max,
        sendBufferSize=SOCKET_BUFFER_BYTES,
        recvBufferSize=SOCKET_BUFFER_BYTES,
        connectionRetryTime=config.connection_retry_ms / 1000,
        connectionTimeout=max(config.election_timeout_max_ms, CONNECTION_TIMEOUT_MS_MIN) / 1000,
        leaderFallbackTimeout=config.leader_fallback_timeout_ms / 1000,
        logCompactionMinEntries=config.compaction_min_entries,
        logCompactionMinTime=config.compaction_min_time_ms / 1000,
        journalFile=str(config.data_dir / JOURNAL_FILE_NAME),
        fullDumpFile=str(config.data_dir / SNAPSHOT_FILE_NAME),
        serializer=storage.snapshot_writer,
        deserializer=storage.read_snapshot,
        bindAddress=address,  # pysyncobj would listen on every interface
        maxBindRetries=1,  # pysyncobj would retry a taken port forever, spinning
    )


def _check_snapshot_and_journal(journal: DurableJournal, snapshot_path: Path) -> None:
    """Refuses files that cannot belong together, and finishes a compaction a crash cut short.

    pysyncobj renames a new snapshot into place one tick before it compacts the journal; at
    start-up it throws the whole journal away when the journal does not begin with the
    snapshot's last two entries, entries after the snapshot included. Compacting here first
    keeps those entries.
    """
    if not snapshot_path.exists():
        if len(journal) and journal[0][1] > 1:
            raise JournalCorruptError(
                f"the journal starts at entry {journal[0][1]} but there is no {snapshot_path}"
            )
        return
    last_entry, previous_entry, _ = pickle.loads(read_raft_data(snapshot_path))
    if not len(journal):
        return
    position = previous_entry[1] - journal[0][1]
    if 0 < position < len(journal) - 1 and journal[position : position + 2] == [
        previous_entry,
        last_entry,
    ]:
        journal.deleteEntriesTo(position)


# ---- the interface -----------------------------------------------------------------------------


class PySyncObjRaftLog:
    """The replicated log of one voter.

    Single-threaded: build it, append() and poll() on one thread (the polling thread); the
    StateMachine and every append callback run there, from inside poll() (or close()).
    wakeup() and status() may be called from any thread.

    An exception from poll() (a failing disk, a snapshot that cannot be loaded, an exception
    from the StateMachine) leaves the log unusable: close it and stop the node.
    """

    def __init__(self, config: RaftConfig, state_machine: StateMachine) -> None:
        """Opens the files in config.data_dir (cutting a torn journal tail) and binds the Raft
        listener. Raises RaftStorageError for files that cannot be trusted, OSError when the
        listener cannot be bound."""
        self._thread_id = threading.get_ident()
        make_directory_durably(config.data_dir)
        self._config = config = with_persisted_voters(config)
        journal = DurableJournal(config.data_dir)
        self._storage = storage = Storage(journal, state_machine)
        try:
            _check_snapshot_and_journal(journal, config.data_dir / SNAPSHOT_FILE_NAME)
            with building((config.data_dir / JOURNAL_FILE_NAME).parent, storage):
                self._node = _PySyncObjNode(config, storage)
        except SyncObjException as error:
            self._release_after_failed_start()
            address = config.voters[config.node_id]
            raise OSError(f"cannot listen for Raft on {address}: {error.errorCode}") from error
        except BaseException:
            self._release_after_failed_start()
            raise
        self._journal = journal
        self._voters: dict[int, Voter] = {}
        self._persist_voters()
        self._in_flight: dict[int, AppendCallback] = {}
        self._next_append_id = 0
        self._outcomes: collections.deque[_Outcome] = collections.deque()
        self._closed = False
        self._status = self._read_status()

    def append(self, payload: bytes, callback: AppendCallback) -> None:
        """Appends `payload` when this node leads. The callback runs exactly once, from a later
        poll(): with apply()'s result once the entry committed and applied here (and is on disk
        on a majority), or with the reason it did not. Never forwarded to another node."""
        self._check_thread()
        if self._closed:
            callback(None, AppendError.SHUTDOWN)
        elif not self._node._isLeader():
            self._outcomes.append((callback, None, AppendError.NOT_LEADER))
        elif len(self._in_flight) >= self._config.queue_entries_max:
            self._outcomes.append((callback, None, AppendError.QUEUE_FULL))
        elif len(payload) >= self._config.entry_bytes_max:
            self._outcomes.append((callback, None, AppendError.TOO_LARGE))
        else:
            append_id = self._next_append_id
            self._next_append_id += 1
            self._in_flight[append_id] = callback
            on_outcome = functools.partial(self._on_outcome, append_id, time.perf_counter())
            # pysyncobj writes one byte per command into its wake-up pipe; a full pipe raises
            # after the command was queued, and means a wake-up is pending anyway.
            with contextlib.suppress(BlockingIOError):
                self._node.apply_payload(payload, callback=on_outcome)

    def poll(self, timeout_ms: int) -> None:
        """Runs Raft: waits up to `timeout_ms` for network events or wakeup() (not at all while
        append outcomes are waiting), handles them, makes the journal durable, then runs the
        StateMachine-applied callbacks. Raises RaftStorageError after a storage failure."""
        self._check_thread()
        assert not self._closed, "poll() after close()"
        wait_s = 0.0 if self._outcomes else max(timeout_ms, 0) / 1000
        # A tick judges its peers (election deadline, leader fallback) before it reads the
        # network, so what arrived while this thread was busy elsewhere is read first: a
        # follower stalled past its election timeout would otherwise depose a live leader.
        self._node._poller.poll(0.0)
        # A tick acts on what it knows, then waits and reads messages; the second tick acts on
        # what was read (commits, applies, replies), so poll() does not return a tick behind.
        self._node.doTick(wait_s)
        self._node.doTick(0.0)
        self._journal.flush()
        if self._storage.failure is not None:
            raise RaftStorageError("the Raft storage failed; this node stops") from (
                self._storage.failure
            )
        self._persist_voters()
        self._status = self._read_status()
        self._deliver_outcomes()

    def add_voter(self, voter: Voter, callback: AppendCallback) -> None:
        """Appends the entry that makes `voter` a voter, when this node leads; the callback runs
        from a later poll() once it committed, or with NOT_LEADER, or DENIED while another
        change is uncommitted or the voter's address is already one."""
        self._change_voters(self._node.addNodeToCluster, _tcp_node(voter), callback)

    def remove_voter(self, node_id: int, callback: AppendCallback) -> None:
        """Appends the entry that removes voter `node_id`, as add_voter. The leader cannot
        remove itself (DENIED): transfer_leadership() first."""
        voter = self._voters.get(node_id)
        node = _tcp_node(voter) if voter is not None else None
        self._change_voters(self._node.removeNodeFromCluster, node, callback)

    def transfer_leadership(self) -> bool:
        """Asks the most caught-up connected follower to start an election now (Raft's
        TimeoutNow). False when this node does not lead or no follower is caught up."""
        self._check_thread()
        sent: list[bool] = []
        self._node.transferLeadership(callback=lambda _, error: sent.append(error == 0))
        return sent == [True]

    def wakeup(self) -> None:
        """Makes a poll() that waits, now or next, return soon. Thread-safe."""
        with contextlib.suppress(BlockingIOError):  # a full pipe: a wake-up is pending anyway
            self._node._SyncObj__pipeNotifier.notify()

    def status(self) -> RaftStatus:
        """The state as of the end of the last poll() (all changes happen inside poll(), so on
        the polling thread this is current). Thread-safe."""
        return self._status

    def close(self) -> None:
        """Closes sockets and files (flushing the journal), then runs the callbacks of appends
        whose outcome was known and fails the others with SHUTDOWN. Idempotent. Call it on the
        polling thread, or once that thread no longer polls."""
        if self._closed:
            return
        self._closed = True
        self._node.destroy()
        assert self._storage.serializer is not None
        self._storage.serializer.close()
        for callback in self._in_flight.values():
            self._outcomes.append((callback, None, AppendError.SHUTDOWN))
        self._in_flight.clear()
        self._deliver_outcomes()

    # ---- inside ----------------------------------------------------------------------------

    def _check_thread(self) -> None:
        assert threading.get_ident() == self._thread_id, "use a RaftLog on the thread that built it"

    def _release_after_failed_start(self) -> None:
        if self._storage.transport is not None:
            self._storage.transport.destroy()  # closes a listening socket that failed to bind
        self._storage.journal._destroy()

    def _change_voters(self, change: Any, node: Any, callback: AppendCallback) -> None:
        self._check_thread()
        if self._closed:
            callback(None, AppendError.SHUTDOWN)
        elif not self._node._isLeader():
            self._outcomes.append((callback, None, AppendError.NOT_LEADER))
        elif node is None:
            self._outcomes.append((callback, None, AppendError.DENIED))
        else:
            append_id = self._next_append_id
            self._next_append_id += 1
            self._in_flight[append_id] = callback
            with contextlib.suppress(BlockingIOError):  # see append()
                change(
                    node,
                    callback=functools.partial(self._on_outcome, append_id, time.perf_counter()),
                )

    def _current_voters(self) -> dict[int, Voter]:
        nodes = [self._node.selfNode, *self._node.otherNodes]
        return {voter.node_id: voter for voter in map(_voter_of, nodes)}

    def _persist_voters(self) -> None:
        """Writes the voter set when it changed since the last write (see `voters.py`)."""
        voters = self._current_voters()
        if voters != self._voters:
            write_voters(self._config.data_dir, voters)
            self._voters = voters

    def _on_outcome(self, append_id: int, appended_s: float, result: object, reason: int) -> None:
        """pysyncobj's callback for one append, inside a tick: only recorded here (and, for a
        committed one, its time from `append` to commit, in RAFT_COMMIT_LATENCY)."""
        assert reason in _ERRORS, f"pysyncobj failed a plain append with reason {reason}"
        error = _ERRORS[reason]
        if error is None:
            RAFT_COMMIT_LATENCY.observe(time.perf_counter() - appended_s)
        callback = self._in_flight.pop(append_id)
        self._outcomes.append((callback, result if error is None else None, error))

    def _deliver_outcomes(self) -> None:
        """Runs the callbacks known now; those their own appends add wait for the next poll."""
        for _ in range(len(self._outcomes)):
            callback, result, error = self._outcomes.popleft()
            callback(result, error)

    def _read_status(self) -> RaftStatus:
        raw = self._node.getStatus()
        is_leader = raw["state"] == _RAFT_STATE.LEADER
        leader = raw["leader"]
        log_end_index = self._journal[-1][1]
        voters = []
        for node_id, voter in sorted(self._voters.items()):
            if node_id == self._config.node_id:
                match_index = self._journal.durable_end_index
                connected = True
            else:
                match_index = raw.get(f"match_idx_server_{voter.address}")
                connected = raw.get(f"partner_node_status_server_{voter.address}") == 2
            voters.append(
                VoterProgress(
                    node_id,
                    voter.address,
                    match_index if is_leader else None,
                    connected,
                    voter.listener,
                )
            )
        ids_by_address = {voter.address: node_id for node_id, voter in self._voters.items()}
        return RaftStatus(
            node_id=self._config.node_id,
            leader_id=None if leader is None else ids_by_address.get(leader.id),
            term=raw["raft_term"],
            is_leader=is_leader,
            commit_index=raw["commit_idx"],
            last_applied=raw["last_applied"],
            log_end_index=log_end_index,
            voters=tuple(voters),
        )
