"""Reading and writing the partition log's unbuffered files, whole and without moving a cursor.

Making those writes durable (fsync of files and directories, atomic replacement) is
`pykraft.server_common.durable_files`, shared with the controller.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Writes all of `data` to the descriptor `fd` (a write may be partial). The log's files
    are opened in append mode, so this writes at the end of the file without a seek."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        assert written > 0, "a write wrote nothing"
        view = view[written:]


def read_at(fd: int, size: int, position: int) -> bytes:
    """Up to `size` bytes from `position` without moving the file's cursor, so readers on other
    threads never disturb a writer (pread); fewer bytes only at the end of the file."""
    return _pread_all(fd, size, position)


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
