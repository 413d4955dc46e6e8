"""The broker's copy of the cluster metadata: fetched from the active controller, applied with
`MetadataDelta`, kept on disk so a restart fetches only what is new.

`MetadataFollower` runs one thread that long-polls `MetadataFetch` after the offset of its image,
applies a snapshot (when the controller no longer holds the records asked for) or the batches,
stores the new image, then hands `(delta, image)` to its listener in log order (`delta` is None
after a snapshot: the listener must compare the whole images). `ImageFile` is the on-disk copy:
`<first log dir>/__cluster_metadata/image`, replaced atomically and durably
(`server_common.durable_files`).
"""

from __future__ import annotations

import logging
import struct
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Final

from pykraft.broker.controller_channel import ControllerCaller, ControllerUnavailableError
from pykraft.metadata_log import (
    MetadataDelta,
    MetadataImage,
    decode_records,
    encode_records,
    replay_all,
)
from pykraft.metadata_log.errors import CorruptRecordError
from pykraft.metadata_log.records import Record
from pykraft.proto import common_pb2, controller_pb2
from pykraft.server_common.durable_files import make_directory_durably, replace_durably

log = logging.getLogger(__name__)

# offset, epoch, CRC-32 of the records that follow.
_HEADER: Final = struct.Struct(">qiI")
METADATA_FETCH_BYTES_MAX: Final = 4 * 1024 * 1024
IMAGE_FILE_NAME: Final = "image"

MetadataListener = Callable[[MetadataDelta | None, MetadataImage], None]


class ImageFile:
    """The metadata image on disk, with the offset and epoch it is as of."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / IMAGE_FILE_NAME

    def read(self) -> MetadataImage:
        """The stored image; the empty image when there is none or it is damaged (then the
        broker fetches everything again, which is always safe)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return MetadataImage.EMPTY
        if len(data) < _HEADER.size:
            log.warning("%s is truncated; fetching all metadata again", self.path)
            return MetadataImage.EMPTY
        offset, epoch, crc = _HEADER.unpack_from(data)
        body = data[_HEADER.size :]
        if zlib.crc32(body) != crc:
            log.warning("%s fails its checksum; fetching all metadata again", self.path)
            return MetadataImage.EMPTY
        try:
            records = decode_records(body)
        except CorruptRecordError as error:
            log.warning("%s: %s; fetching all metadata again", self.path, error)
            return MetadataImage.EMPTY
        return replay_all(MetadataImage.EMPTY, records).apply(offset=offset, epoch=epoch)

    def write(self, image: MetadataImage) -> None:
        """Replaces the stored image atomically and durably: a crash leaves the old one or the
        new one, and the directory it lives in survives power loss once this returns."""
        body = encode_records(image.write())
        make_directory_durably(self.path.parent)
        header = _HEADER.pack(image.offset, image.epoch, zlib.crc32(body))
        replace_durably(self.path, header + body)


def apply_fetch_response(
    image: MetadataImage, response: controller_pb2.MetadataFetchResponse
) -> tuple[MetadataDelta | None, MetadataImage]:
    """The image after a MetadataFetch answer, and the delta from `image` to it (None when a
    snapshot replaced the image). Records at or below the image's offset are skipped."""
    replaced = response.HasField("snapshot")
    if replaced:
        snapshot = response.snapshot
        image = replay_all(MetadataImage.EMPTY, decode_records(snapshot.records)).apply(
            offset=snapshot.offset, epoch=snapshot.epoch
        )
    new: list[tuple[int, int, Record]] = []  # offset, batch epoch, record
    last_offset = image.offset
    for batch in response.batches:
        for index, record in enumerate(decode_records(batch.records)):
            if batch.base_offset + index > last_offset:
                last_offset = batch.base_offset + index
                new.append((last_offset, batch.epoch, record))
    delta = replay_all(image, (record for _, _, record in new))
    if new:
        epoch = max(image.epoch, *(batch_epoch for _, batch_epoch, _ in new))
        image = delta.apply(offset=new[-1][0], epoch=epoch)
    return (None if replaced else delta), image


class MetadataFollower:
    """Keeps the broker's image level with the controller's log, on one thread."""

    def __init__(
        self,
        *,
        broker_id: int,
        caller: ControllerCaller,
        image_file: ImageFile,
        listener: MetadataListener,
        fetch_wait_ms: int,
        request_timeout_ms: int,
    ) -> None:
        self._broker_id = broker_id
        self._caller = caller
        self._image_file = image_file
        self._listener = listener
        self._fetch_wait_ms = fetch_wait_ms
        self._request_timeout_ms = request_timeout_ms
        self._image = image_file.read()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failure: BaseException | None = None

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def applied_offset(self) -> int:
        """Offset of the last record applied (-1 if none), as heartbeats report it."""
        return self._image.offset

    def load(self) -> None:
        """Hands the image read from disk to the listener, as a change from the empty image."""
        if self._image.offset >= 0:
            log.info("metadata image on disk as of offset %d", self._image.offset)
            self._listener(None, self._image)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="metadata-fetch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if not self.fetch_once():
                    self._stop.wait(self._fetch_wait_ms / 1000)
        except BaseException as error:  # a replay error must stop the broker, not be skipped
            log.exception("metadata follower failed")
            self.failure = error

    def fetch_once(self) -> bool:
        """One long poll and what it brought applied; False if no controller answered."""
        request = controller_pb2.MetadataFetchRequest(
            broker_id=self._broker_id,
            after_offset=self._image.offset,
            max_wait_ms=self._fetch_wait_ms,
            max_bytes=METADATA_FETCH_BYTES_MAX,
        )
        timeout_s = (self._fetch_wait_ms + self._request_timeout_ms) / 1000
        try:
            response = self._caller.call(
                "MetadataFetch", request, controller_pb2.MetadataFetchResponse, timeout_s
            )
        except ControllerUnavailableError as error:
            log.warning("metadata fetch failed: %s", error)
            return False
        if response.header.error_code != common_pb2.NONE:
            log.warning("metadata fetch refused: %s", response.header.error_message)
            return False
        delta, image = apply_fetch_response(self._image, response)
        if image is not self._image:
            self._image_file.write(image)
            self._listener(delta, image)
            self._image = image  # heartbeats report it only once the broker acted on it
        return True

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=(self._fetch_wait_ms + self._request_timeout_ms) / 1000)
