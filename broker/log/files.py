"""Reading and writing the partition log's unbuffered files, whole and without moving a cursor.

Making those writes durable (fsync of files and directories, atomic replacement) is
`pykraft.server_common.durable_files`, shared with the controller.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pykraft.proto.record_batch import Buffer

# The most buffers one writev takes (the system's IOV_MAX; POSIX guarantees 16).
WRITEV_BUFFERS_MAX: Final = max(16, os.sysconf("SC_IOV_MAX"))
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)


def write_all(fd: int, data: Buffer) -> None:
    """Writes all of `data` to the descriptor `fd`: `writev_all` of one buffer."""
    writev_all(fd, [data])


def writev_all(fd: int, pieces: Sequence[Buffer]) -> None:
    """Writes `pieces` one after the other to the descriptor `fd`, as one write of their
    concatenation would, without joining them first (writev; a write may be partial, and takes
    at most WRITEV_BUFFERS_MAX buffers). The log's files are opened in append mode, so this
    writes at the end of the file without a seek."""
    views = [memoryview(piece) for piece in pieces if len(piece)]
    first = 0
    while first < len(views):
        written = os.writev(fd, views[first : first + WRITEV_BUFFERS_MAX])
        assert written > 0, "a write wrote nothing"
        while written and written >= views[first].nbytes:
            written -= views[first].nbytes
            first += 1
        if written:
            views[first] = views[first][written:]


def read_at(fd: int, size: int, position: int) -> bytes:
    """Up to `size` bytes from `position` without moving the file's cursor, so readers on other
    threads never disturb a writer (pread); fewer bytes only at the end of the file."""
    return _pread_all(fd, size, position)


READ_CHUNK_BYTES: Final = 1 << 16  # bytes `read_whole` asks for per read


def read_whole(path: Path) -> bytes:
    """The whole content of the file at `path`, in four system calls for a small file (open,
    read, the empty read that proves the end, close), where `Path.read_bytes` takes ten: a
    broker opening 20,000 logs reads a leader-epoch checkpoint for each (issue 18 §1.2).
    Raises OSError (FileNotFoundError when there is none)."""
    fd = os.open(path, os.O_RDONLY | _CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, READ_CHUNK_BYTES):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _pread_all(fd: int, size: int, position: int) -> bytes:
    chunks = []
    while size > 0 and (chunk := os.pread(fd, size, position)):
        chunks.append(chunk)
        size -= len(chunk)
        position += len(chunk)
    return b"".join(chunks)


@dataclass
class FileRange:
    """`length` bytes of a segment's `.log` file from `position`, on `fd`: a duplicate (os.dup)
    of the segment's descriptor that this range owns until `close` (idempotent).

    Why a duplicate rather than a reference to the segment: the range is sent after the log's
    read lock is released, on the listener's event loop, at the pace of the client's socket.
    Meanwhile retention or the cleaner may close and unlink the segment; the duplicate keeps
    the open file, so its inode and bytes, alive for one system call, without holding the log's
    lock across network I/O (a slow consumer would stall truncation) or counting references in
    every segment. Only truncation cuts the file itself, and a consumer's range lies below the
    high-water mark, which only an unclean election truncates; the bytes then found past the
    new end are missing, so `read` returns fewer and a sender must treat a short send as a
    failure (closing the connection, as for any broken answer)."""

    fd: int
    position: int
    length: int

    def read(self) -> bytes:
        """The bytes, read normally (when they cannot be sent from the file)."""
        return _pread_all(self.fd, self.length, self.position)

    def close(self) -> None:
        """Closes the descriptor once; also when collected, for a range whose answer was
        dropped unsent (its connection closed while the handler ran)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    __del__ = close
