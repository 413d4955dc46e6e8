"""The broker's metadata image on disk, `<first log dir>/__cluster_metadata/image`: what it has
applied, with the offset and epoch it is as of, so a restart fetches only the records after it.

A chunked file (`server_common/chunked_files.py`) whose header holds the offset and epoch and
whose chunks are the codec's batches (`encode_chunks`): the image is written and read chunk by
chunk (never one bytes object), replaced atomically and durably. A file that fails any check
(torn, damaged, cut short, extra bytes) is ignored whole and the broker fetches everything
again, which is always safe; a damaged image is never trusted.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

from pykraft.metadata_log import MetadataImage, encode_chunks, image_of_chunks
from pykraft.metadata_log.errors import CorruptRecordError, MetadataReplayError
from pykraft.server_common.chunked_files import ChunkedFileError, ChunkedFileFormat
from pykraft.server_common.durable_files import make_directory_durably

log = logging.getLogger(__name__)

IMAGE_FILE_NAME: Final = "image"
# The largest chunk written: what reading or writing the image holds in memory at once.
IMAGE_CHUNK_BYTES_MAX: Final = 1024 * 1024
_FORMAT: Final = ChunkedFileFormat(magic=b"PKIMAGE\x01", fields_format="qi")  # offset, epoch


class ImageFile:
    """The metadata image on disk, with the offset and epoch it is as of."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / IMAGE_FILE_NAME

    def read(self) -> MetadataImage:
        """The stored image; the empty image when there is none or it fails a check."""
        try:
            with _FORMAT.reading(self.path) as ((offset, epoch), chunks):
                return image_of_chunks(chunks, offset=offset, epoch=epoch)
        except FileNotFoundError:
            return MetadataImage.EMPTY
        except (ChunkedFileError, CorruptRecordError, MetadataReplayError) as error:
            log.warning("%s: %s; fetching all metadata again", self.path, error)
            return MetadataImage.EMPTY

    def write(self, image: MetadataImage) -> None:
        """Replaces the stored image atomically and durably: a crash leaves the old one or the
        new one, and the directory it lives in survives power loss once this returns."""
        make_directory_durably(self.path.parent)
        chunks = encode_chunks(image.records(), IMAGE_CHUNK_BYTES_MAX)
        _FORMAT.write(self.path, (image.offset, image.epoch), chunks)
