"""File helpers that make writes survive power loss, for the partition log.

A write is durable only after fsync of the file and, when it created, renamed or removed a
directory entry, fsync of the directory too: the helpers here do both so callers cannot forget one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO


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


def write_all(file: BinaryIO, data: bytes | bytearray | memoryview) -> None:
    """Writes all of `data` to an unbuffered file (a raw write may be partial). The log's files
    are opened in append mode, so this writes at the end of the file without a seek."""
    view = memoryview(data)
    while view:
        written = file.write(view)
        assert written is not None and written > 0, "an unbuffered file wrote nothing"
        view = view[written:]


def read_at(file: BinaryIO, size: int, position: int) -> bytes:
    """Up to `size` bytes from `position` without moving the file's cursor, so readers on other
    threads never disturb a writer (pread); fewer bytes only at the end of the file."""
    chunks = []
    while size > 0:
        chunk = os.pread(file.fileno(), size, position)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        position += len(chunk)
    return b"".join(chunks)


def replace_durably(path: Path, data: bytes) -> None:
    """Replaces `path` by a file holding `data`, atomically and durably: readers and a crash
    see either the old or the new content, and once this returns the new one stays."""
    temp_path = path.with_name(path.name + ".tmp")
    with open(temp_path, "wb", buffering=0) as file:
        write_all(file, data)
        os.fsync(file.fileno())
    os.replace(temp_path, path)
    fsync_directory(path.parent)


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
