"""The metadata batches a broker applied since its stored image, `__cluster_metadata/log`: as
Kafka's brokers keep a `__cluster_metadata` replica between snapshots, so a metadata change
costs an append of its own size, not a rewrite of the whole image (about a second at 100,000
partitions). The follower rewrites the image and empties the log once the log passes
`METADATA_LOG_BYTES_MAX`.

Layout: frames `[u32 length of what follows the crc][u32 crc32 of it][i64 base offset][i32
epoch][records]`, records being one of the codec's batches. Each append is fsynced before the
broker acts on it. At start `load` applies the frames that continue the stored image; it stops
at the first frame that is torn, fails its checksum or leaves a gap (a crash in the middle of
an append, or a log that followed an image now damaged), cuts the file there and the broker
fetches the rest: nothing damaged is ever applied.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from pykraft.metadata_log import MetadataDelta, MetadataImage, decode_records
from pykraft.metadata_log.errors import CorruptRecordError, MetadataReplayError
from pykraft.server_common.durable_files import (
    fsync_directory,
    make_directory_durably,
    pwrite_all,
    replace_durably,
)

log = logging.getLogger(__name__)

LOG_FILE_NAME: Final = "log"
# The log's size past which the follower rewrites the image and empties the log (Kafka's
# metadata.log.max.record.bytes.between.snapshots is 20 MiB).
METADATA_LOG_BYTES_MAX: Final = 16 * 1024 * 1024
_FRAME: Final = struct.Struct(">II")  # length, crc32
_BATCH: Final = struct.Struct(">qi")  # base offset, epoch

FetchedBatch = tuple[int, int, bytes]  # base offset, epoch, records


class MetadataLogFile:
    """The batches applied after the stored image, appended durably."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOG_FILE_NAME

    def size_bytes(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def append(self, batches: Iterable[FetchedBatch]) -> None:
        """Appends `batches` and fsyncs them (the directory too when the file is new)."""
        data = bytearray()
        for base_offset, epoch, records in batches:
            body = _BATCH.pack(base_offset, epoch) + records
            data += _FRAME.pack(len(body), zlib.crc32(body)) + body
        if not data:
            return
        created = not self.path.exists()
        make_directory_durably(self.path.parent)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            pwrite_all(fd, data, os.fstat(fd).st_size)
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_directory(self.path.parent)

    def clear(self) -> None:
        """Empties the log durably (the image it followed has been replaced)."""
        if self.path.exists():
            replace_durably(self.path, b"")

    def read(self, image: MetadataImage) -> MetadataImage:
        """`image` with the log's frames that continue it applied; changes no file (another
        process may read while the broker appends)."""
        return self._replay(image)[0]

    def load(self, image: MetadataImage) -> MetadataImage:
        """`read`, at start: the log is then cut after the last frame applied, so appends
        continue from there."""
        loaded, end = self._replay(image)
        if end < self.size_bytes():
            log.warning("%s: damaged or out of step at byte %d; fetching the rest", self.path, end)
            replace_durably(self.path, self.path.read_bytes()[:end])
        return loaded

    def _replay(self, image: MetadataImage) -> tuple[MetadataImage, int]:
        """The image after the frames that continue `image`, and where the first other begins."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return image, 0
        delta = MetadataDelta(image)
        last_offset, epoch, pos = image.offset, image.epoch, 0
        while pos < len(data):
            batch = _frame_at(data, pos)
            if batch is None or batch[0] > last_offset + 1:
                break
            base_offset, batch_epoch, records = batch
            try:
                decoded = decode_records(records)
            except CorruptRecordError as error:  # a checksum match on bad records: a bug
                raise MetadataReplayError(f"{self.path} at byte {pos}: {error}") from error
            for index, record in enumerate(decoded):
                if base_offset + index > last_offset:
                    delta.replay(record)
                    last_offset, epoch = base_offset + index, max(epoch, batch_epoch)
            pos += _FRAME.size + _BATCH.size + len(records)
        if last_offset == image.offset:
            return image, pos
        return delta.apply(offset=last_offset, epoch=epoch), pos


def _frame_at(data: bytes, pos: int) -> FetchedBatch | None:
    """The frame at `pos`, or None when it is torn or fails its checksum."""
    if pos + _FRAME.size + _BATCH.size > len(data):
        return None
    length, crc = _FRAME.unpack_from(data, pos)
    body = data[pos + _FRAME.size : pos + _FRAME.size + length]
    if length < _BATCH.size or len(body) != length or zlib.crc32(body) != crc:
        return None
    base_offset, epoch = _BATCH.unpack_from(body)
    return base_offset, epoch, body[_BATCH.size :]
