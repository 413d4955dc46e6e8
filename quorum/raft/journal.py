"""The Raft journal and the quorum-state file, fsynced where Raft needs it.

`DurableJournal` replaces pysyncobj's FileJournal (an mmap that is never flushed, and a term/vote
file written without fsync). It implements pysyncobj's Journal interface by duck typing, with
pysyncobj's method names, because only `pysyncobj_log` may import pysyncobj.

Journal file: an 8-byte header (magic, format version), then append-only frames
    [u32 length][u32 crc32c][u64 index][u64 term][command bytes]
little-endian, where `length` is the command's length and the crc32c covers index, term and
command. On open, the first short or checksum-bad frame and everything after it are cut off: that
is the torn tail a crash leaves, and only entries this node never acknowledged can be in it
(nothing is acknowledged before `flush()`).

quorum-state file: term, vote and commit index, replaced atomically (temp file, fsync, rename,
fsync directory). Term and vote are stored synchronously on every change, so before any message
that reflects them leaves; the commit index lazily (it is an optimisation: entries up to it can be
re-applied at start-up before a leader is known), and never past what the journal has fsynced.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import overload

import crc32c

from pykraft.quorum.raft.errors import JournalCorruptError, RaftStorageError
from pykraft.server_common.durable_files import (
    fsync_directory,
    fsync_file,
    pwrite_all,
    replace_durably,
)

log = logging.getLogger(__name__)

JOURNAL_FILE_NAME = "raft-journal"
QUORUM_STATE_FILE_NAME = "quorum-state"

Entry = tuple[bytes, int, int]  # (command, index, term), the shape pysyncobj uses

_JOURNAL_HEADER = b"PKRJ" + struct.pack("<I", 1)
_FRAME_HEADER = struct.Struct("<IIQQ")  # length, crc32c, index, term
_FRAME_CRC_START = 8  # the crc covers the frame from the index on
_STATE_MAGIC = b"PKQS"
_STATE_HEADER = struct.Struct("<4sI")  # magic, crc32c of the JSON body
_STATE_FORMAT_VERSION = 1


def encode_frame(command: bytes, index: int, term: int) -> bytes:
    body = struct.pack("<QQ", index, term) + command
    return struct.pack("<II", len(command), crc32c.crc32c(body)) + body


def decode_frames(data: bytes, offset: int) -> tuple[list[Entry], list[int]]:
    """Parses frames from `offset` up to the first short or checksum-bad one.

    Returns the entries and the file offset just past each of them. Raises JournalCorruptError
    when two valid frames are not consecutive: a torn write cannot produce that.
    """
    entries: list[Entry] = []
    ends: list[int] = []
    while offset + _FRAME_HEADER.size <= len(data):
        length, crc, index, term = _FRAME_HEADER.unpack_from(data, offset)
        end = offset + _FRAME_HEADER.size + length
        if end > len(data) or crc32c.crc32c(data[offset + _FRAME_CRC_START : end]) != crc:
            break
        if entries and index != entries[-1][1] + 1:
            raise JournalCorruptError(f"entry {index} follows entry {entries[-1][1]}")
        entries.append((data[offset + _FRAME_HEADER.size : end], index, term))
        ends.append(end)
        offset = end
    return entries, ends


@dataclass(frozen=True)
class QuorumState:
    """What Raft must remember across restarts besides the log."""

    current_term: int = 0
    voted_for: str | None = None  # pysyncobj's node id of the candidate (its "host:port")
    commit_index: int = 1  # pysyncobj's default: entry 1 is the no-op every log starts with


def read_quorum_state(path: Path) -> QuorumState:
    """The stored state, or the initial one when the file does not exist."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return QuorumState()
    if len(data) < _STATE_HEADER.size:
        raise RaftStorageError(f"{path}: too short for a quorum-state file")
    magic, crc = _STATE_HEADER.unpack_from(data)
    body = data[_STATE_HEADER.size :]
    if magic != _STATE_MAGIC or crc32c.crc32c(body) != crc:
        raise RaftStorageError(f"{path}: bad magic or checksum, refusing to guess term and vote")
    fields = json.loads(body)
    if fields.get("version") != _STATE_FORMAT_VERSION:
        raise RaftStorageError(f"{path}: unknown format version {fields.get('version')}")
    return QuorumState(fields["current_term"], fields["voted_for"], fields["commit_index"])


def write_quorum_state(path: Path, state: QuorumState) -> None:
    """Replaces the stored state atomically and durably."""
    fields = {
        "version": _STATE_FORMAT_VERSION,
        "current_term": state.current_term,
        "voted_for": state.voted_for,
        "commit_index": state.commit_index,
    }
    body = json.dumps(fields, sort_keys=True).encode()
    replace_durably(path, _STATE_HEADER.pack(_STATE_MAGIC, crc32c.crc32c(body)) + body)


class DurableJournal:
    """pysyncobj's Journal on our own files in `directory`.

    Not thread-safe: pysyncobj calls it from the polling thread only. Positions given to
    `deleteEntriesFrom`/`deleteEntriesTo` are list positions, as pysyncobj passes them, not
    Raft indexes. The snapshot lives in the same directory (see `deleteEntriesTo`).
    """

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._path = directory / JOURNAL_FILE_NAME
        self._state_path = directory / QUORUM_STATE_FILE_NAME
        self._stored_state = read_quorum_state(self._state_path)
        self._commit_index = self._stored_state.commit_index
        self._fd = self._open_file()
        try:
            self._entries, self._frame_ends = self._load()
            self._make_read_state_durable()
        except BaseException:
            os.close(self._fd)
            raise
        self._dirty = False
        self._durable_end_index = self._last_index()

    # ---- what pysyncobj calls ----------------------------------------------------------------

    def add(self, command: bytes, idx: int, term: int) -> None:
        assert isinstance(command, bytes), type(command)
        if self._entries:
            _, last_index, last_term = self._entries[-1]
            assert idx == last_index + 1, f"entry {idx} appended after {last_index}"
            assert term >= last_term, f"term {term} appended after term {last_term}"
        offset = self._end_offset()
        frame = encode_frame(command, idx, term)
        pwrite_all(self._fd, frame, offset)
        self._entries.append((command, idx, term))
        self._frame_ends.append(offset + len(frame))
        self._dirty = True

    def clear(self) -> None:
        self.deleteEntriesFrom(0)

    def deleteEntriesFrom(self, position: int) -> None:
        """Drops the entries from list position `position` on (a conflicting suffix)."""
        if position >= len(self._entries):
            return
        del self._entries[position:]
        del self._frame_ends[position:]
        os.ftruncate(self._fd, self._end_offset())
        self._dirty = True
        self._durable_end_index = min(self._durable_end_index, self._last_index())

    def deleteEntriesTo(self, position: int) -> None:
        """Drops the entries before list position `position`, after a snapshot covered them.

        pysyncobj renamed the snapshot into place without syncing the directory; that rename is
        made durable first, or a crash could leave neither the entries nor the snapshot. The kept
        entries are then written to a new file that replaces the journal atomically.
        """
        fsync_directory(self._directory)
        kept = self._entries[position:]
        temp_path = self._path.with_name(self._path.name + ".tmp")
        fd = os.open(temp_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            frames = b"".join(encode_frame(*entry) for entry in kept)
            pwrite_all(fd, _JOURNAL_HEADER + frames, 0)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        os.replace(temp_path, self._path)
        fsync_directory(self._directory)
        os.close(self._fd)
        self._fd = fd
        self._entries = kept
        self._frame_ends = []
        offset = len(_JOURNAL_HEADER)
        for command, _, _ in kept:
            offset += _FRAME_HEADER.size + len(command)
            self._frame_ends.append(offset)
        self._dirty = False
        self._durable_end_index = self._last_index()

    @overload
    def __getitem__(self, item: int) -> Entry: ...

    @overload
    def __getitem__(self, item: slice) -> list[Entry]: ...

    def __getitem__(self, item: int | slice) -> Entry | list[Entry]:
        return self._entries[item]

    def __len__(self) -> int:
        return len(self._entries)

    def _destroy(self) -> None:
        """Closes the files, flushing first. pysyncobj calls this from SyncObj.destroy()."""
        if self._fd < 0:
            return
        self.flush()
        self._store_state_if_changed()
        os.close(self._fd)
        self._fd = -1

    def flush(self) -> None:
        """fdatasync when anything was written since the last flush; cheap otherwise."""
        if self._dirty:
            os.fdatasync(self._fd)
            self._dirty = False
            self._durable_end_index = self._last_index()

    def setRaftCommitIndex(self, commit_index: int) -> None:
        self._commit_index = commit_index

    def getRaftCommitIndex(self) -> int:
        return self._commit_index

    def setCurrentTerm(self, term: int, voted_for: str | None) -> None:
        """Stores term and vote durably before returning: pysyncobj sends the vote request or
        grant that reflects them right after this call."""
        stored = self._stored_state
        if (term, voted_for) == (stored.current_term, stored.voted_for):
            return
        assert term >= stored.current_term, f"term moves back from {stored.current_term} to {term}"
        self._store_state(replace(stored, current_term=term, voted_for=voted_for))

    def getCurrentTerm(self) -> int:
        return self._stored_state.current_term

    def getVotedForNodeId(self) -> str | None:
        return self._stored_state.voted_for

    def onOneSecondTimer(self) -> None:
        """Stores a changed commit index, after flushing so it never points past the disk."""
        if self._commit_index != self._stored_state.commit_index:
            self.flush()
            self._store_state_if_changed()

    # ---- ours --------------------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """Whether something was written or truncated since the last flush."""
        return self._dirty

    @property
    def durable_end_index(self) -> int:
        """Index of the last entry known to be on stable storage (0 when there is none)."""
        return self._durable_end_index

    def _last_index(self) -> int:
        return self._entries[-1][1] if self._entries else 0

    def _end_offset(self) -> int:
        return self._frame_ends[-1] if self._frame_ends else len(_JOURNAL_HEADER)

    def _store_state_if_changed(self) -> None:
        if self._stored_commit_index() != self._stored_state.commit_index:
            self._store_state(self._stored_state)

    def _stored_commit_index(self) -> int:
        return min(self._commit_index, self._durable_end_index)

    def _store_state(self, state: QuorumState) -> None:
        state = replace(state, commit_index=self._stored_commit_index())
        write_quorum_state(self._state_path, state)
        self._stored_state = state

    def _open_file(self) -> int:
        """Opens the journal, creating it (header only, durably) when missing or torn before its
        header was complete."""
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(fd).st_size < len(_JOURNAL_HEADER):
            os.ftruncate(fd, 0)
            pwrite_all(fd, _JOURNAL_HEADER, 0)
            os.fsync(fd)
            fsync_directory(self._directory)
        return fd

    def _load(self) -> tuple[list[Entry], list[int]]:
        size = os.fstat(self._fd).st_size
        data = os.pread(self._fd, size, 0)
        if data[: len(_JOURNAL_HEADER)] != _JOURNAL_HEADER:
            raise JournalCorruptError(f"{self._path}: not a journal of this format")
        entries, ends = decode_frames(data, len(_JOURNAL_HEADER))
        valid_end = ends[-1] if ends else len(_JOURNAL_HEADER)
        if valid_end < size:
            log.warning(
                "%s: cutting a torn tail of %d bytes after entry %s",
                self._path,
                size - valid_end,
                entries[-1][1] if entries else None,
            )
            os.ftruncate(self._fd, valid_end)
        return entries, ends

    def _make_read_state_durable(self) -> None:
        """What a crashed process left in the page cache is on disk once this returns, so this
        node never acknowledges an entry, term or vote that a power loss could still undo."""
        os.fsync(self._fd)
        if self._state_path.exists():
            fsync_file(self._state_path)
        fsync_directory(self._directory)
