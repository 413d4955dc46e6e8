"""The broker's metadata image on disk, `<first log dir>/__cluster_metadata/image`: what it has
applied, with the offset and epoch it is as of, so a restart fetches only the records after it.

Layout (big-endian): a header `[8s magic][i64 offset][i32 epoch][u32 chunk count][u32 crc32 of
the fields before it]`, then `chunk count` chunks, each `[u32 length][u32 crc32][records]` where
records is one of the codec's batches (`encode_chunks`). The image is written and read chunk by
chunk (never one bytes object), replaced atomically and durably (`replacing_durably`). A file
that fails any check (torn, damaged, cut short, extra bytes) is ignored whole and the broker
fetches everything again, which is always safe; a damaged image is never trusted.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path
from typing import BinaryIO, Final

from pykraft.metadata_log import (
    MetadataDelta,
    MetadataImage,
    decode_records,
    encode_chunks,
)
from pykraft.metadata_log.errors import CorruptRecordError, MetadataReplayError
from pykraft.server_common.durable_files import make_directory_durably, replacing_durably

log = logging.getLogger(__name__)

IMAGE_FILE_NAME: Final = "image"
# The largest chunk written: what reading or writing the image holds in memory at once.
IMAGE_CHUNK_BYTES_MAX: Final = 1024 * 1024
_MAGIC: Final = b"PKIMAGE\x01"
_FIELDS: Final = struct.Struct(">8sqiI")  # magic, offset, epoch, chunk count
_CRC: Final = struct.Struct(">I")
_CHUNK_HEADER: Final = struct.Struct(">II")  # length, crc32


class ImageFileError(Exception):
    """Why a stored image cannot be trusted."""


class ImageFile:
    """The metadata image on disk, with the offset and epoch it is as of."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / IMAGE_FILE_NAME

    def read(self) -> MetadataImage:
        """The stored image; the empty image when there is none or it fails a check."""
        try:
            with open(self.path, "rb") as file:
                return _read_image(file)
        except FileNotFoundError:
            return MetadataImage.EMPTY
        except (ImageFileError, CorruptRecordError, MetadataReplayError) as error:
            log.warning("%s: %s; fetching all metadata again", self.path, error)
            return MetadataImage.EMPTY

    def write(self, image: MetadataImage) -> None:
        """Replaces the stored image atomically and durably: a crash leaves the old one or the
        new one, and the directory it lives in survives power loss once this returns."""
        make_directory_durably(self.path.parent)
        with replacing_durably(self.path) as file:
            file.write(bytes(_FIELDS.size + _CRC.size))  # the header, once the count is known
            count = 0
            for chunk in encode_chunks(image.records(), IMAGE_CHUNK_BYTES_MAX):
                file.write(_CHUNK_HEADER.pack(len(chunk), zlib.crc32(chunk)) + chunk)
                count += 1
            fields = _FIELDS.pack(_MAGIC, image.offset, image.epoch, count)
            file.seek(0)
            file.write(fields + _CRC.pack(zlib.crc32(fields)))


def _read_image(file: BinaryIO) -> MetadataImage:
    header = _read_exactly(file, _FIELDS.size + _CRC.size, "the header")
    fields = header[: _FIELDS.size]
    (crc,) = _CRC.unpack_from(header, _FIELDS.size)
    if zlib.crc32(fields) != crc:
        raise ImageFileError("the header fails its checksum")
    magic, offset, epoch, count = _FIELDS.unpack(fields)
    if magic != _MAGIC:
        raise ImageFileError(f"not an image file (magic {magic!r})")
    delta = MetadataDelta(MetadataImage.EMPTY)
    for index in range(count):
        length, chunk_crc = _CHUNK_HEADER.unpack(_read_exactly(file, _CHUNK_HEADER.size, "a chunk"))
        chunk = _read_exactly(file, length, f"chunk {index}")
        if zlib.crc32(chunk) != chunk_crc:
            raise ImageFileError(f"chunk {index} fails its checksum")
        for record in decode_records(chunk):
            delta.replay(record)
    if file.read(1):
        raise ImageFileError(f"bytes follow the last of its {count} chunks")
    return delta.apply(offset=offset, epoch=epoch)


def _read_exactly(file: BinaryIO, size: int, what: str) -> bytes:
    """`size` bytes, checked against what the file holds first (a damaged length must not
    make the read allocate gigabytes)."""
    if size > os.fstat(file.fileno()).st_size - file.tell():
        raise ImageFileError(f"cut short in {what}")
    return file.read(size)
