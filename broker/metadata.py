"""The broker's copy of the cluster metadata: fetched from the active controller, applied with
`MetadataDelta`, kept on disk so a restart fetches only what is new.

`MetadataFollower` runs one thread that long-polls `MetadataFetch` after the offset of its image,
applies the stream it gets (a snapshot, when the controller no longer holds the records asked
for, or the batches), hands `(delta, image)` to its listener in log order (`delta` is None after
a snapshot: the listener must compare the whole images), then stores what it applied. The
stream's messages are replayed as they arrive (`read_fetch_stream`), and published only once
the stream ended whole. On disk (`<first log dir>/__cluster_metadata`), as Kafka's brokers keep
a snapshot and their metadata log replica: `ImageFile` (`metadata_image_file.py`), the image as
of an offset, and `MetadataLogFile` (`metadata_log_file.py`), the batches applied since; a
restart loads both and asks the controller only for what follows.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from pykraft.broker.controller_channel import ControllerCaller, ControllerUnavailableError
from pykraft.broker.metadata_image_file import ImageFile
from pykraft.broker.metadata_log_file import METADATA_LOG_BYTES_MAX, FetchedBatch, MetadataLogFile
from pykraft.metadata_log import MetadataDelta, MetadataImage, decode_records
from pykraft.metadata_log.image_loader import SnapshotLoader
from pykraft.proto import common_pb2, controller_pb2
from pykraft.server_common.gc_pauses import long_lived_build

log = logging.getLogger(__name__)

# The largest answer message the broker asks for (the controller caps it with its own limit,
# metadata.fetch.bytes.max): what one message of the stream holds in memory on either side.
METADATA_FETCH_BYTES_MAX: Final = 1024 * 1024

MetadataListener = Callable[[MetadataDelta | None, MetadataImage], None]


class MetadataFetchError(Exception):
    """The controller refused the fetch, or its stream ended before the snapshot it began."""


@dataclass(frozen=True, slots=True)
class Fetched:
    """What one MetadataFetch stream brought: the image after it, the delta from the image
    before (None when a snapshot replaced it), how many records it carried and the
    controller's last committed offset."""

    delta: MetadataDelta | None
    image: MetadataImage
    records: int
    high_watermark: int
    batches: tuple[FetchedBatch, ...]  # as received: what the follower appends to its log


def read_fetch_stream(
    image: MetadataImage, responses: Iterable[controller_pb2.MetadataFetchResponse]
) -> Fetched:
    """Replays a MetadataFetch stream onto `image` message by message (a snapshot's chunks onto
    the empty image instead). Records at or below the image's offset are skipped."""
    delta = MetadataDelta(image)
    snapshot: tuple[int, int] | None = None  # offset, epoch of the snapshot being read
    loader: SnapshotLoader | None = None  # while a snapshot is being read
    last_offset, epoch, records, high_watermark = image.offset, image.epoch, 0, -1
    batches: list[FetchedBatch] = []
    # A snapshot is built with the collector off and frozen after (in a server: `gc_pauses`).
    with contextlib.ExitStack() as building:
        for response in responses:
            high_watermark = response.high_watermark
            if response.header.error_code != common_pb2.NONE:
                raise MetadataFetchError(f"refused: {response.header.error_message}")
            if response.HasField("snapshot"):
                chunk = response.snapshot
                if snapshot is None and records == 0:
                    snapshot = (chunk.offset, chunk.epoch)
                    last_offset, epoch = snapshot
                    loader = SnapshotLoader(offset=chunk.offset, epoch=chunk.epoch)
                    building.enter_context(long_lived_build())
                elif snapshot != (chunk.offset, chunk.epoch) or loader is None:  # or after batches
                    raise MetadataFetchError(f"a chunk of snapshot {chunk.offset} out of place")
                records += loader.take_chunk(chunk.records)
                if chunk.last_chunk:
                    delta, loader = MetadataDelta(loader.image()), None
                    building.close()
            if response.batches and loader is not None:
                raise MetadataFetchError(f"batches inside snapshot {last_offset}")
            for batch in response.batches:
                batches.append((batch.base_offset, batch.epoch, batch.records))
                for index, record in enumerate(decode_records(batch.records)):
                    if batch.base_offset + index > last_offset:
                        last_offset = batch.base_offset + index
                        epoch = max(epoch, batch.epoch)
                        delta.replay(record)
                        records += 1
    if loader is not None:
        raise MetadataFetchError(f"the stream ended inside snapshot {last_offset}")
    if snapshot is None and last_offset == image.offset:
        return Fetched(delta, image, records, high_watermark, tuple(batches))
    image = delta.apply(offset=last_offset, epoch=epoch)
    return Fetched(None if snapshot else delta, image, records, high_watermark, tuple(batches))


class MetadataFollower:
    """Keeps the broker's image level with the controller's log, on one thread."""

    def __init__(
        self,
        *,
        broker_id: int,
        caller: ControllerCaller,
        image_file: ImageFile,
        log_file: MetadataLogFile,
        listener: MetadataListener,
        fetch_wait_ms: int,
        request_timeout_ms: int,
    ) -> None:
        self._broker_id = broker_id
        self._caller = caller
        self._image_file = image_file
        self._log_file = log_file
        self._listener = listener
        self._fetch_wait_ms = fetch_wait_ms
        self._request_timeout_ms = request_timeout_ms
        self._image = MetadataImage.EMPTY  # until `load` reads what is on disk
        self._stop = threading.Event()
        # Held while the image or log is written: `stop` waits for a write under way, so a clean
        # stop leaves on disk what the broker applied.
        self._storing = threading.Lock()
        self._stored_for_good = False  # set by `stop`, under `_storing`
        self._thread: threading.Thread | None = None
        self.failure: BaseException | None = None
        # Records the fetches brought since start (a restart from a stored image fetches only
        # the tail); read by the metrics.
        self.records_fetched = 0

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def applied_offset(self) -> int:
        """Offset of the last record applied (-1 if none), as heartbeats report it."""
        return self._image.offset

    def load(self) -> None:
        """Reads the image and log stored on disk (a million partitions take seconds: the
        caller decides under which garbage collector settings) and hands the image to the
        listener, as a change from the empty image. Called once, before `start`."""
        self._image = self._log_file.load(self._image_file.read())
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
        """One long poll and what it brought applied; False if no controller answered whole."""
        request = controller_pb2.MetadataFetchRequest(
            broker_id=self._broker_id,
            after_offset=self._image.offset,
            max_wait_ms=self._fetch_wait_ms,
            max_bytes=METADATA_FETCH_BYTES_MAX,
        )
        # The longest wait for each answer (the first one waits out the long poll); the stream
        # as a whole may take longer, while the answers of a large image are replayed.
        timeout_s = (self._fetch_wait_ms + self._request_timeout_ms) / 1000
        try:
            responses = self._caller.call_stream(
                "MetadataFetch", request, controller_pb2.MetadataFetchResponse, timeout_s
            )
            fetched = read_fetch_stream(self._image, responses)
        except (ControllerUnavailableError, MetadataFetchError) as error:
            log.warning("metadata fetch failed: %s", error)
            return False
        self.records_fetched += fetched.records
        if fetched.delta is None:
            log.info(
                "metadata snapshot as of offset %d applied: %d records",
                fetched.image.offset,
                fetched.records,
            )
        if fetched.image is not self._image:
            self._listener(fetched.delta, fetched.image)
            self._image = fetched.image  # heartbeats report it only once the broker acted on it
            self._store(fetched)
        return True

    def _store(self, fetched: Fetched) -> None:
        """Appends what was fetched to the log; after a snapshot, or once the log is long,
        rewrites the image and empties the log (in that order: a crash between the two leaves
        a log whose records the image already holds, which loading skips). Called after the
        broker acted on the image and heartbeats report it: a million-partition image takes
        seconds to write, and what is on disk is only where a restart starts fetching from (a
        crash before it is written fetches those records again)."""
        with self._storing:
            if self._stored_for_good:
                return  # stopped: the next start fetches these records again
            if fetched.delta is not None and self._log_file.size_bytes() < METADATA_LOG_BYTES_MAX:
                self._log_file.append(fetched.batches)
                return
            self._image_file.write(fetched.image)
            self._log_file.clear()

    def stop(self) -> None:
        """Ends the fetches (waiting at most one long poll for the thread) and waits for a
        write of the image or log under way to finish; none starts afterwards."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=(self._fetch_wait_ms + self._request_timeout_ms) / 1000)
        with self._storing:
            self._stored_for_good = True
