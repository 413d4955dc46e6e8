"""Files written and read as a stream of bounded chunks, each with its own checksum, so neither
the writer nor the reader ever holds the whole content as one bytes object: the broker's stored
metadata image and the controller's Raft snapshot.

Layout (big-endian): a header `[8s magic][the caller's fields][u32 chunk count][u32 crc32 of
what precedes it in the header]`, then `chunk count` chunks, each `[u32 length][u32 crc32]
[bytes]`. The file is replaced atomically and durably (`replacing_durably`); its header is
written last, once the count is known. A reader gets the chunks one at a time, each checked
before it is handed out. A file that fails any check (torn, damaged, cut short, another kind,
bytes after the last chunk) raises ChunkedFileError: it is never half trusted.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final

from pykraft.server_common.durable_files import replacing_durably

_MAGIC_BYTES: Final = 8
_CRC: Final = struct.Struct(">I")
_CHUNK_HEADER: Final = struct.Struct(">II")  # length, crc32


class ChunkedFileError(Exception):
    """Why a chunked file cannot be trusted."""


@dataclass(frozen=True)
class ChunkedFileFormat:
    """One kind of chunked file: its magic (which names its version too) and the fixed-size
    fields its header carries, as a big-endian struct format without the byte-order mark."""

    magic: bytes
    fields_format: str

    def __post_init__(self) -> None:
        assert len(self.magic) == _MAGIC_BYTES, self.magic

    @property
    def _header(self) -> struct.Struct:
        return struct.Struct(f">{_MAGIC_BYTES}s{self.fields_format}I")

    def write(self, path: Path, fields: tuple[Any, ...], chunks: Iterable[bytes]) -> int:
        """Replaces `path` with `fields` and `chunks`, drawn one at a time, atomically and
        durably: a crash leaves the old file or the new one. Returns the chunk count. The
        caller makes the directory durable first."""
        header = self._header
        with replacing_durably(path) as file:
            file.write(bytes(header.size + _CRC.size))  # the header, once the count is known
            count = 0
            for chunk in chunks:
                file.write(_CHUNK_HEADER.pack(len(chunk), zlib.crc32(chunk)))
                file.write(chunk)
                count += 1
            packed = header.pack(self.magic, *fields, count)
            file.seek(0)
            file.write(packed + _CRC.pack(zlib.crc32(packed)))
        return count

    @contextlib.contextmanager
    def reading(self, path: Path) -> Iterator[tuple[tuple[Any, ...], Iterator[bytes]]]:
        """(the header's fields, its chunks) of the file at `path`, checked as they are read;
        the chunks must be drawn while the file is open. The last chunk drawn checks that
        nothing follows it. FileNotFoundError when there is no file."""
        with open(path, "rb") as file:
            fields, count = self._read_header(file)
            yield fields, _checked_chunks(file, count)

    def _read_header(self, file: BinaryIO) -> tuple[tuple[Any, ...], int]:
        header = self._header
        data = _read_exactly(file, header.size + _CRC.size, "the header")
        (crc,) = _CRC.unpack_from(data, header.size)
        if zlib.crc32(data[: header.size]) != crc:
            # Before the magic: a file of another kind fails here too, so say which it is.
            if data[:_MAGIC_BYTES] != self.magic:
                raise ChunkedFileError(f"not a file of this kind (magic {data[:_MAGIC_BYTES]!r})")
            raise ChunkedFileError("the header fails its checksum")
        magic, *fields, count = header.unpack_from(data)
        if magic != self.magic:
            raise ChunkedFileError(f"not a file of this kind (magic {magic!r})")
        return tuple(fields), count


def _checked_chunks(file: BinaryIO, count: int) -> Iterator[bytes]:
    for index in range(count):
        length, crc = _CHUNK_HEADER.unpack(_read_exactly(file, _CHUNK_HEADER.size, "a chunk"))
        chunk = _read_exactly(file, length, f"chunk {index}")
        if zlib.crc32(chunk) != crc:
            raise ChunkedFileError(f"chunk {index} fails its checksum")
        yield chunk
    if file.read(1):
        raise ChunkedFileError(f"bytes follow the last of its {count} chunks")


def _read_exactly(file: BinaryIO, size: int, what: str) -> bytes:
    """`size` bytes, checked against what the file holds first (a damaged length must not
    make the read allocate gigabytes)."""
    if size > os.fstat(file.fileno()).st_size - file.tell():
        raise ChunkedFileError(f"cut short in {what}")
    return file.read(size)
