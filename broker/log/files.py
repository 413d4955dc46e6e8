"""Reading and writing the partition log's unbuffered files, whole and without moving a cursor.

Making those writes durable (fsync of files and directories, atomic replacement) is
`pykraft.server_common.durable_files`, shared with the controller.
"""

from __future__ import annotations

import os
from typing import BinaryIO


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
