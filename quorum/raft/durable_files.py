"""File helpers that make writes survive power loss, and the errors of the Raft storage.

A write is durable only after fsync of the file and, when it created or renamed a directory
entry, fsync of the directory too: the helpers here do both so callers cannot forget one.
"""

from __future__ import annotations

import os
from pathlib import Path


class RaftStorageError(Exception):
    """The Raft files cannot be trusted or written; the node must stop rather than guess."""


class JournalCorruptError(RaftStorageError):
    """The journal is damaged somewhere a crash cannot explain (not a torn tail)."""


class SnapshotCorruptError(RaftStorageError):
    """The snapshot file fails its magic, version or checksum test."""


def fsync_directory(directory: Path) -> None:
    """Makes creations, renames and deletions inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
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


def pwrite_all(fd: int, data: bytes, offset: int) -> None:
    """Writes all of `data` at `offset` (os.pwrite may write less than asked)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def replace_durably(path: Path, data: bytes) -> None:
    """Replaces `path` by a file holding `data`, atomically and durably: readers and a crash
    see either the old or the new content, and once this returns the new one stays."""
    temp_path = path.with_name(path.name + ".tmp")
    fd = os.open(temp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp_path, path)
    fsync_directory(path.parent)
