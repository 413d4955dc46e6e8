"""File helpers that make writes survive power loss, for every server role's files.

A write is durable only after fsync of the file and, when it created, renamed or removed a
directory entry, fsync of the directory too: the helpers here do both so callers cannot forget
one. The partition log, the broker's metadata image, the Raft journal and snapshot, and the
controller's `meta.properties` all write through them. A shutdown that writes thousands of files
(a broker closing 20,000 logs: five fsyncs each) writes them without fsync and then makes the
whole filesystem durable at once (`sync_filesystem`) before it records a clean shutdown.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


def fsync_directory(directory: Path) -> None:
    """Makes creations, renames and deletions inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Makes the content of `path` durable, whoever wrote it (its name needs the directory's
    fsync too, when it is new)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_directory_durably(directory: Path) -> None:
    """Creates `directory` and its missing parents so that they survive power loss."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for created in reversed(missing):
        created.mkdir(exist_ok=True)
        fsync_directory(created.parent)


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
    """Writes all of `data` at `offset` (os.pwrite may write less than asked)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def write_file_durably(path: Path, data: bytes) -> None:
    """Makes `data` the whole content of `path` (created or truncated) and fsyncs it. Not
    atomic, and a new name survives power loss only once the caller fsyncs the directory:
    for files that are renamed into place afterwards."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Replaces `path` by a file holding `data`, atomically and durably: readers and a crash
    see either the old or the new content, and once this returns the new one stays. The new
    content is written to `<name>.tmp` first, which a crash may leave behind. With `fsync`
    False it is atomic for readers only: durable once the caller's `sync_filesystem` returns,
    and a crash before may leave any content (the reader must check it)."""
    with replacing_durably(path, fsync=fsync) as file:
        file.write(data)


@contextlib.contextmanager
def replacing_durably(path: Path, *, fsync: bool = True) -> Iterator[BinaryIO]:
    """`replace_durably` for content written piece by piece: the caller writes the new content
    into the file handed out (`<name>.tmp`, positioned at its start); when the block ends
    normally it is fsynced (if `fsync`) and renamed over `path`, and the directory fsynced (if
    `fsync`). An exception leaves `path` as it was (and the temporary file, which the next
    replacement truncates)."""
    temp_path = path.with_name(path.name + ".tmp")
    with open(temp_path, "wb") as file:
        yield file
        file.flush()
        if fsync:
            os.fsync(file.fileno())
    os.replace(temp_path, path)
    if fsync:
        fsync_directory(path.parent)


_LIBC = ctypes.CDLL(None, use_errno=True)


def sync_filesystem(directory: Path) -> None:
    """Makes every write to the filesystem holding `directory` durable, names included (Linux
    syncfs(2), which reports the filesystem's writeback errors since Linux 5.8); raises
    OSError. One call instead of an fsync per file written."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _LIBC.syncfs(fd) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error), str(directory))
    finally:
        os.close(fd)


def unlink_durably(paths: list[Path]) -> None:
    """Removes the files that exist among `paths` and makes the removal durable."""
    directories = set()
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        directories.add(path.parent)
    for directory in directories:
        fsync_directory(directory)
