"""What SyncObj builds for itself, replaced so that pysyncobj persists before it speaks: the
journal it opens, the serializer that writes snapshots (on a thread of its own) and sends their
files, the transport that sends messages (`pysyncobj_log.py`'s docstring says why). Part of the
pysyncobj gate: only this module and `pysyncobj_log.py` import pysyncobj.

`building(directory, storage)` makes `storage` the one SyncObj's hooks find while the RaftLog on
`directory` is being built; `Storage` then holds that node's journal, snapshot hooks, transport
and first fatal failure.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pysyncobj.syncobj as pysyncobj_syncobj
from pysyncobj import FAIL_REASON, SERIALIZER_STATE
from pysyncobj.monotonic import monotonic as pysyncobj_clock
from pysyncobj.serializer import Serializer
from pysyncobj.transport import TCPTransport

from pykraft.quorum.raft.api import StateMachine
from pykraft.quorum.raft.append_entries import AppendPlan, Entry, is_stale_reset, plan_append
from pykraft.quorum.raft.journal import DurableJournal
from pykraft.quorum.raft.snapshot_file import (
    reading_snapshot_file,
    sync_snapshot_file,
    write_snapshot_file,
)

# What `Serializer.checkSerializing` reads from its `pid` without fork: 0 idle, -1 written,
# -2 failed; and, here, a write under way on the writer thread.
_WRITTEN, _WRITE_FAILED, _WRITING = -1, -2, -3

log = logging.getLogger(__name__)

# How far apart the followers call an election once the leader's connection closed: above a
# vote request's round trip, far below an election timeout.
LOST_LEADER_STAGGER_MS = 100
# How often every peer is sent a keepalive, well within pysyncobj's connection timeout
# (pysyncobj_log.CONNECTION_TIMEOUT_MS_MIN, 3.5 s at least), so no link idles out.
KEEPALIVE_INTERVAL_MS = 1000
KEEPALIVE_TYPE = "pykraft_keepalive"

_storages_being_built: dict[Path, Storage] = {}
_storages_lock = threading.Lock()


def _storage_for(file_name: str | None) -> Storage:
    """The storage of the RaftLog being built whose data directory holds `file_name`."""
    directory = Path(file_name or "").parent
    with _storages_lock:
        storage = _storages_being_built.get(directory)
    if storage is None:
        raise RuntimeError(f"pysyncobj opened {file_name!r}, which is no RaftLog's")
    return storage


@contextlib.contextmanager
def building(directory: Path, storage: Storage) -> Iterator[None]:
    with _storages_lock:
        assert directory not in _storages_being_built, f"two RaftLogs on {directory}"
        _storages_being_built[directory] = storage
    try:
        yield
    finally:
        with _storages_lock:
            del _storages_being_built[directory]


def _create_journal(journal_file: str | None) -> DurableJournal:
    """Stands in for `pysyncobj.syncobj.createJournal` (see the module docstring)."""
    return _storage_for(journal_file).journal


class _ThreadedSerializer(Serializer):  # type: ignore[misc]
    """Stands in for pysyncobj's Serializer, for two reasons.

    It writes each snapshot on a thread of its own, as pysyncobj's fork mode does in a child
    process: the state machine's parts are taken on the polling thread, as of the entry the
    snapshot covers, and drawn by the writer while the node goes on replicating (a snapshot of
    1,000,000 partitions takes seconds to write, longer than an election timeout). pysyncobj
    compacts the journal only once `checkSerializing` reports the file written, and a snapshot
    arriving from the leader replaces ours only once ours is written, so an older snapshot
    never lands over a newer one.

    It closes the snapshot files it sends to followers, which pysyncobj drops (after the last
    chunk, on a cancel, on a new snapshot) and leaves, with a ResourceWarning, to the garbage
    collector. Both reach pysyncobj's private attributes, which 0.3.17 (pinned) names as used
    here.
    """

    _Serializer__pid: int  # pysyncobj's: 0 idle, or one of _WRITTEN, _WRITE_FAILED, _WRITING

    def __init__(self, file_name: str, *args: Any) -> None:
        super().__init__(file_name, *args)
        _storage_for(file_name).serializer = self
        self._writer: threading.Thread | None = None

    def serialize(self, data: Any, entry_id: Any) -> None:
        """Starts writing the snapshot `data` (pysyncobj's own state, then its raft data) of
        the entry `entry_id`, unless a write is under way."""
        if self._Serializer__pid != 0:
            return
        write = self._Serializer__serializer(self._Serializer__fileName, data[1:])
        self._Serializer__currentID = entry_id
        self._Serializer__pid = _WRITING  # pysyncobj sends no snapshot while it writes one
        self._writer = threading.Thread(
            target=self._write, args=(write,), name="raft-snapshot-writer", daemon=True
        )
        self._writer.start()

    def _write(self, write: Callable[[], None]) -> None:
        try:
            write()
        except BaseException:  # `write` keeps the failure: the next poll() raises it
            self._Serializer__pid = _WRITE_FAILED
        else:
            self._Serializer__pid = _WRITTEN

    def checkSerializing(self) -> Any:
        if self._Serializer__pid == _WRITING:
            return SERIALIZER_STATE.SERIALIZING, self._Serializer__currentID
        with self._closing_dropped_files():
            return super().checkSerializing()

    def setTransmissionData(self, data: Any) -> Any:
        if data is not None and data[2]:  # the last piece: it is renamed over our snapshot
            self.wait_for_writer()
        return super().setTransmissionData(data)

    def wait_for_writer(self) -> None:
        """Returns once no snapshot is being written (at most one write's time)."""
        if self._writer is not None:
            self._writer.join()

    def getTransmissionData(self, transmission_id: Any) -> Any:
        with self._closing_dropped_files():
            return super().getTransmissionData(transmission_id)

    def cancelTransmisstion(self, transmission_id: Any) -> None:
        with self._closing_dropped_files():
            super().cancelTransmisstion(transmission_id)

    def close(self) -> None:
        """Waits for a snapshot being written, then closes every file still open, for when the
        node is destroyed."""
        self.wait_for_writer()
        for file in self._sending_files().values():
            file.close()
        if self._Serializer__incomingTransmissionFile is not None:
            self._Serializer__incomingTransmissionFile.close()

    @contextlib.contextmanager
    def _closing_dropped_files(self) -> Iterator[None]:
        before = self._sending_files()
        try:
            yield
        finally:
            still_sending = self._sending_files()
            for key, file in before.items():
                if key not in still_sending:
                    file.close()

    def _sending_files(self) -> dict[int, Any]:
        transmissions = self._Serializer__transmissions.values()
        return {id(t["file"]): t["file"] for t in transmissions if "file" in t}


pysyncobj_syncobj.createJournal = _create_journal
pysyncobj_syncobj.Serializer = _ThreadedSerializer


# ---- what the pysyncobj hooks share ----------------------------------------------------------


class Storage:
    """The durable side of one node: journal, snapshot hooks, and the first fatal failure."""

    def __init__(self, journal: DurableJournal, state_machine: StateMachine) -> None:
        self.journal = journal
        self.state_machine = state_machine
        self.failure: BaseException | None = None
        self.transport: DurableTransport | None = None
        self.serializer: _ThreadedSerializer | None = None

    def snapshot_writer(self, file_name: str, raft_data: tuple[object, ...]) -> Callable[[], None]:
        """pysyncobj's `serializer` hook, as `_ThreadedSerializer` calls it on the polling
        thread: the state machine's parts are taken now, with pysyncobj's (last entry, previous
        entry, cluster), which only this node reads back or sends to a follower. The result
        writes them to `file_name` (through a temporary file, fsynced and renamed) on the
        writer thread, keeping any failure."""
        pickled = pickle.dumps(raft_data)
        parts = self.state_machine.snapshot()

        def write() -> None:
            try:
                write_snapshot_file(Path(file_name), pickled, parts)
            except BaseException as error:  # pysyncobj would only log it and retry every tick
                self.failure = error
                raise

        return write

    def read_snapshot(self, file_name: str) -> tuple[object, ...]:
        """pysyncobj's `deserializer` hook, at start-up and when the leader sent a snapshot
        (which pysyncobj wrote and renamed without fsync): makes the file durable, checks it,
        restores the state machine and returns pysyncobj's raft data."""
        path = Path(file_name)
        try:
            sync_snapshot_file(path)
            with reading_snapshot_file(path) as (raft_data, state_parts):
                entries = tuple(pickle.loads(raft_data))
                self.state_machine.restore(state_parts)
        except BaseException as error:  # pysyncobj would log it and go on without the state
            self.failure = error
            raise
        return entries


class DurableTransport(TCPTransport):  # type: ignore[misc]
    """pysyncobj's TCP transport, flushing the journal before anything is sent, and applying
    Raft's AppendEntries rule to what is received (`append_entries.py` says why)."""

    def __init__(self, sync_obj: Any, self_node: Any, other_nodes: Any, *, storage: Storage):
        self._storage = storage
        self._transmission = b""  # a large entry arriving in parts, as pysyncobj gathers it
        self._next_keepalive_s = 0.0
        storage.transport = self
        super().__init__(sync_obj, self_node, other_nodes)

    def _onMessageReceived(self, node: Any, message: Any) -> None:
        if isinstance(message, dict) and is_stale_reset(message, lambda: self._match_index(node)):
            message = {**message, "reset": False}  # still counts as the follower's answer
        plan = self._plan(message)
        if plan is None:
            super()._onMessageReceived(node, message)
            return
        super()._onMessageReceived(node, plan.message)
        if plan.acknowledge_index is not None:  # pysyncobj does not answer a commit-only one
            answer = {"type": "next_node_idx", "reset": False, "success": True}
            self.send(node, {**answer, "next_node_idx": plan.acknowledge_index + 1})

    def _onTick(self) -> None:
        """pysyncobj's tick work (bind, reconnect), then a keepalive to every peer each
        KEEPALIVE_INTERVAL_MS. Followers have nothing to say to each other while a leader
        lives, and pysyncobj drops a connection that read nothing for its connection timeout
        when it next sends on it: a candidate's vote request, the first message on that link
        in a long while, was lost with it, the vote split, and a failover waited out the
        election timeout. pysyncobj ignores a message type it does not know."""
        super()._onTick()
        now_s = pysyncobj_clock()
        if now_s < self._next_keepalive_s:
            return
        self._next_keepalive_s = now_s + KEEPALIVE_INTERVAL_MS / 1000
        for node in list(self._nodes):
            self.send(node, {"type": KEEPALIVE_TYPE})

    def _onDisconnected(self, conn: Any) -> None:
        """A closed connection to the leader means it died (a killed process's kernel closes
        its sockets at once) or restarts: the followers call an election instead of waiting
        out their election timeout, which only a silent leader must cost. They stand one
        after another in node id order, LOST_LEADER_STAGGER_MS apart, so they do not split the
        vote: the first one's request reaches the next before it would stand. A live leader
        that lost one connection answers the election with its term."""
        node = self._connToNode(conn)
        super()._onDisconnected(conn)
        sync_obj = self._syncObj
        if node is None or node != sync_obj._getLeader() or sync_obj._isLeader():
            return
        standing = sorted(node_id_of(n) for n in {self._selfNode, *self._nodes} if n != node)
        rank = standing.index(node_id_of(self._selfNode))
        # pysyncobj's clock: CLOCK_MONOTONIC_RAW, not time.monotonic's CLOCK_MONOTONIC.
        deadline_s = pysyncobj_clock() + rank * LOST_LEADER_STAGGER_MS / 1000
        current_s = sync_obj._SyncObj__raftElectionDeadline
        sync_obj._SyncObj__raftElectionDeadline = min(current_s, deadline_s)
        log.info(
            "the leader's connection (%s) closed: an election in %d ms at most",
            node.address,
            max(0.0, (min(current_s, deadline_s) - pysyncobj_clock()) * 1000),
        )

    def _plan(self, message: Any) -> AppendPlan | None:
        """The plan for a regular AppendEntries request of the current term or a later one
        (pysyncobj ignores older ones), or None for any other message."""
        if not isinstance(message, dict) or message.get("type") != "append_entries":
            return None
        journal = self._storage.journal
        if "prevLogIdx" not in message or message["term"] < journal.getCurrentTerm():
            return None
        entries = self._entries_of(message)
        if entries is None:
            return None
        return plan_append(message, entries, self._term_at, journal[-1][1])

    def _entries_of(self, message: dict[str, Any]) -> list[Entry] | None:
        """The request's entries; None while a large entry is still arriving in parts."""
        part = message.get("transmission")
        if part is None:
            return list(message.get("entries", []))
        if part == "start":
            self._transmission = message["data"]
            return None
        self._transmission += message["data"]
        if part != "finish":
            return None
        entry, self._transmission = pickle.loads(self._transmission), b""
        return [entry]

    def _match_index(self, node: Any) -> int | None:
        match_indexes: dict[Any, int] = self._syncObj._SyncObj__raftMatchIndex
        return match_indexes.get(node)

    def _term_at(self, index: int) -> int | None:
        journal = self._storage.journal
        position = index - journal[0][1]
        return journal[position][2] if 0 <= position < len(journal) else None

    def send(self, node: Any, message: dict[str, Any]) -> bool:
        if self._storage.failure is not None:
            return False
        self._storage.journal.flush()
        if message["type"] == "apply_command":
            self._refuse_to_forward(node, message)
            return False
        return bool(super().send(node, message))

    def _refuse_to_forward(self, node: Any, message: dict[str, Any]) -> None:
        """Answers a command pysyncobj would forward to the leader as the leader answers one it
        cannot take, so the append fails with NOT_LEADER on this node."""
        if "request_id" in message:
            refusal = {
                "type": "apply_command_response",
                "request_id": message["request_id"],
                "error": FAIL_REASON.NOT_LEADER,
            }
            self._onMessageReceived(node, refusal)


def node_id_of(node: Any) -> int:
    """The voter's node id, which our pysyncobj nodes carry as an attribute (-1 without)."""
    return int(getattr(node, "node_id", -1))
