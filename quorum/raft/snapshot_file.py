"""The snapshot file: the state machine's snapshot plus the Raft data that goes with it.

Layout: [8s magic][u32 format version][u32 crc32c of the rest][u64 state length][state][raft data]
(little-endian). The raft data is opaque here: pysyncobj's last two applied entries and cluster,
pickled by `pysyncobj_log`. A file that fails any check raises SnapshotCorruptError: starting
from half a snapshot would silently lose every entry compacted into it.
"""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c

from pykraft.quorum.raft.errors import SnapshotCorruptError
from pykraft.server_common.durable_files import fsync_directory, fsync_file, write_file_durably

SNAPSHOT_FILE_NAME = "raft-snapshot"

_MAGIC = b"PKRSNAP\x00"
_FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sII")  # magic, format version, crc32c of everything after the header
_STATE_LENGTH = struct.Struct("<Q")


def write_snapshot_file(path: Path, state: bytes, raft_data: bytes) -> None:
    """Writes a new file at `path` and fsyncs it; the caller renames it into place and syncs the
    directory (pysyncobj renames; `DurableJournal.deleteEntriesTo` syncs)."""
    body = _STATE_LENGTH.pack(len(state)) + state + raft_data
    data = _HEADER.pack(_MAGIC, _FORMAT_VERSION, crc32c.crc32c(body)) + body
    write_file_durably(path, data)


def read_snapshot_file(path: Path) -> tuple[bytes, bytes]:
    """Returns (state, raft data) of a checked snapshot file."""
    data = path.read_bytes()
    header_end = _HEADER.size + _STATE_LENGTH.size
    if len(data) < header_end:
        raise SnapshotCorruptError(f"{path}: {len(data)} bytes is too short for a snapshot")
    magic, version, crc = _HEADER.unpack_from(data)
    if magic != _MAGIC:
        raise SnapshotCorruptError(f"{path}: not a snapshot file (magic {magic!r})")
    if version != _FORMAT_VERSION:
        raise SnapshotCorruptError(f"{path}: unknown snapshot format version {version}")
    if crc32c.crc32c(data[_HEADER.size :]) != crc:
        raise SnapshotCorruptError(f"{path}: checksum mismatch")
    (state_length,) = _STATE_LENGTH.unpack_from(data, _HEADER.size)
    if header_end + state_length > len(data):
        raise SnapshotCorruptError(f"{path}: state length {state_length} runs past the end")
    return data[header_end : header_end + state_length], data[header_end + state_length :]


def sync_snapshot_file(path: Path) -> None:
    """Makes a snapshot file that someone else wrote and renamed durable, content and name."""
    fsync_file(path)
    fsync_directory(path.parent)
