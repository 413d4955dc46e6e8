"""The snapshot file: the state machine's snapshot plus the Raft data that goes with it.

A chunked file (`server_common/chunked_files.py`, every chunk with its own checksum): the first
chunk is the raft data, opaque here (pysyncobj's last two applied entries and cluster, pickled by
`pysyncobj_storage`); the others are the state machine's parts, written as the state machine
draws them and handed to its restore one at a time, so the snapshot is never one bytes object
(32 MiB at 1,000,000 partitions). pysyncobj sends the file to a follower in pieces of its own.
A file that fails any check raises SnapshotCorruptError: starting from half a snapshot would
silently lose every entry compacted into it.

Files of the format before chunks (format 1: `[8s magic][u32 version][u32 crc32c of the rest]
[u64 state length][state][raft data]`, little-endian) are still read, whole, so a controller
upgraded over one keeps what it compacted; its state is one part. Only chunked files are written.
"""

from __future__ import annotations

import contextlib
import itertools
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

import crc32c

from pykraft.quorum.raft.errors import SnapshotCorruptError
from pykraft.server_common.chunked_files import ChunkedFileError, ChunkedFileFormat
from pykraft.server_common.durable_files import fsync_directory, fsync_file

SNAPSHOT_FILE_NAME: Final = "raft-snapshot"

_FORMAT: Final = ChunkedFileFormat(magic=b"PKRSNAP\x02", fields_format="")
_FORMAT_1_MAGIC: Final = b"PKRSNAP\x00"
_FORMAT_1_HEADER: Final = struct.Struct("<8sIIQ")  # magic, version 1, crc32c, state length
_FORMAT_1_CHECKED_FROM: Final = 16  # the checksum covers the state length and what follows


def write_snapshot_file(path: Path, raft_data: bytes, state_parts: Iterable[bytes]) -> None:
    """Writes `path` (through a temporary file, fsynced and renamed into place), drawing the
    state's parts one at a time. pysyncobj renames it again, over the snapshot it replaces;
    `DurableJournal.deleteEntriesTo` syncs that rename before compacting."""
    _FORMAT.write(path, (), itertools.chain((raft_data,), state_parts))


@contextlib.contextmanager
def reading_snapshot_file(path: Path) -> Iterator[tuple[bytes, Iterator[bytes]]]:
    """(raft data, the state's parts) of the file at `path`, each part checked as it is drawn
    inside the block: a damaged one raises SnapshotCorruptError out of the block."""
    with open(path, "rb") as file:
        magic = file.read(len(_FORMAT_1_MAGIC))
    if magic == _FORMAT_1_MAGIC:
        yield _read_format_1(path)
        return
    try:
        with _FORMAT.reading(path) as (_, chunks):
            first = next(chunks, None)
            if first is None:
                raise SnapshotCorruptError(f"{path}: a snapshot without its raft data")
            yield first, chunks
    except ChunkedFileError as error:
        raise SnapshotCorruptError(f"{path}: {error}") from error


def _read_format_1(path: Path) -> tuple[bytes, Iterator[bytes]]:
    """(raft data, the state as one part) of a checked file of format 1."""
    data = path.read_bytes()
    if len(data) < _FORMAT_1_HEADER.size:
        raise SnapshotCorruptError(f"{path}: {len(data)} bytes is too short for a snapshot")
    _, version, crc, state_length = _FORMAT_1_HEADER.unpack_from(data)
    if version != 1:
        raise SnapshotCorruptError(f"{path}: unknown snapshot format version {version}")
    if crc32c.crc32c(data[_FORMAT_1_CHECKED_FROM:]) != crc:
        raise SnapshotCorruptError(f"{path}: checksum mismatch")
    state_end = _FORMAT_1_HEADER.size + state_length
    if state_end > len(data):
        raise SnapshotCorruptError(f"{path}: state length {state_length} runs past the end")
    return data[state_end:], iter((data[_FORMAT_1_HEADER.size : state_end],))


def read_raft_data(path: Path) -> bytes:
    """The raft data alone, checked; the state's parts are checked when they are restored."""
    with reading_snapshot_file(path) as (raft_data, _):
        return raft_data


def sync_snapshot_file(path: Path) -> None:
    """Makes a snapshot file that someone else wrote and renamed durable, content and name."""
    fsync_file(path)
    fsync_directory(path.parent)
