"""The broker's metadata: the stored image (written and read chunk by chunk, every chunk checked;
a damaged file is never trusted) and the follower that loads it at start and asks the controller
only for what is newer, falling back to everything when the stored image cannot be read."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykraft.broker import metadata, metadata_image_file
from pykraft.broker.metadata import MetadataFollower, read_fetch_stream
from pykraft.broker.metadata_image_file import ImageFile
from pykraft.broker.metadata_log_file import MetadataLogFile
from pykraft.metadata_log import MetadataDelta, MetadataImage, encode_records
from pykraft.metadata_log.records import PartitionChangeRecord, Record
from pykraft.proto import controller_pb2

from .images import ORDERS_ID, advance, cluster_image, topic_records

ORDERS = topic_records("orders", ORDERS_ID, [(1, 2)])
MANY = topic_records("many", ORDERS_ID, [(1, 2, 3)] * 3000)


def test_the_image_file_round_trips_with_offset_and_epoch(tmp_path: Path) -> None:
    image = cluster_image(ORDERS)
    image_file = ImageFile(tmp_path / "__cluster_metadata")
    assert image_file.read() == MetadataImage.EMPTY
    image_file.write(image)
    image_file.write(image)  # replacing works too
    restored = image_file.read()
    assert restored == image
    assert (restored.offset, restored.epoch) == (image.offset, image.epoch)
    assert [p.name for p in image_file.path.parent.iterdir()] == ["image"]


def test_a_large_image_is_written_in_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metadata_image_file, "IMAGE_CHUNK_BYTES_MAX", 4096)
    image = cluster_image(MANY)
    image_file = ImageFile(tmp_path)
    image_file.write(image)
    assert image_file.path.stat().st_size > 20 * 4096
    assert image_file.read() == image


def _damaged(data: bytes) -> Iterator[tuple[str, bytes]]:
    """Every way the tests damage a stored image."""
    yield "empty", b""
    yield "one byte", data[:1]
    yield "header only", data[:24]
    yield "cut in the last chunk", data[:-1]
    yield "cut at a chunk boundary", data[: len(data) // 2]
    yield "extra bytes", data + b"\x00"
    for position in (0, 10, 30, len(data) // 2, len(data) - 1):
        flipped = bytearray(data)
        flipped[position] ^= 0x40
        yield f"bit flipped at {position}", bytes(flipped)


def test_a_damaged_image_file_means_fetching_everything_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metadata_image_file, "IMAGE_CHUNK_BYTES_MAX", 4096)
    image_file = ImageFile(tmp_path)
    image_file.write(cluster_image(MANY))
    data = image_file.path.read_bytes()
    for how, damaged in _damaged(data):
        image_file.path.write_bytes(damaged)
        assert image_file.read() == MetadataImage.EMPTY, how


def test_the_image_file_creates_its_directory_durably(
    tmp_path: Path, fsynced_paths: list[Path]
) -> None:
    """A power loss after the first write must not lose the directory the image lives in: every
    directory the write creates is fsynced in its parent, as the partition log's are."""
    image_file = ImageFile(tmp_path / "logs" / "__cluster_metadata")
    image_file.write(cluster_image(ORDERS))
    for directory in (tmp_path, tmp_path / "logs", tmp_path / "logs" / "__cluster_metadata"):
        assert directory in fsynced_paths, f"{directory} was not fsynced"
    assert image_file.path.with_name("image.tmp") in fsynced_paths  # then renamed


def _batches(
    base_offset: int, epoch: int, records: list[Record]
) -> controller_pb2.MetadataFetchResponse:
    response = controller_pb2.MetadataFetchResponse(high_watermark=base_offset + len(records) - 1)
    response.batches.add(base_offset=base_offset, epoch=epoch, records=encode_records(records))
    return response


def test_batches_apply_as_one_delta_skipping_records_already_applied() -> None:
    image = cluster_image(ORDERS)
    change = PartitionChangeRecord(ORDERS_ID, 0, leader=2)
    # The batch starts one record before the image's offset: that record is skipped.
    fetched = read_fetch_stream(image, [_batches(image.offset, 3, [ORDERS[-1], change])])
    assert fetched.delta is not None and fetched.delta.image is image
    assert fetched.records == 1 and fetched.high_watermark == image.offset + 1
    applied = fetched.image
    assert (applied.offset, applied.epoch) == (image.offset + 1, 3)
    assert applied.topics.get(ORDERS_ID).partitions[0].leader == 2  # type: ignore[union-attr]
    assert advance(image, [change])[1].topics == applied.topics


def test_an_empty_answer_changes_nothing() -> None:
    image = cluster_image()
    fetched = read_fetch_stream(image, [controller_pb2.MetadataFetchResponse()])
    assert fetched.image is image and fetched.records == 0
    assert fetched.delta is not None


def _snapshot_chunk(image: MetadataImage, *, last: bool) -> controller_pb2.MetadataFetchResponse:
    response = controller_pb2.MetadataFetchResponse(high_watermark=image.offset)
    response.snapshot.offset, response.snapshot.epoch = image.offset, image.epoch
    response.snapshot.records = encode_records(image.write())
    response.snapshot.last_chunk = last
    return response


def test_a_snapshot_is_built_as_its_image_and_batches_inside_it_are_refused() -> None:
    image = cluster_image(MANY)
    fetched = read_fetch_stream(MetadataImage.EMPTY, [_snapshot_chunk(image, last=True)])
    assert fetched.delta is None and fetched.image == image
    assert fetched.records == len(image.write())
    change = PartitionChangeRecord(ORDERS_ID, 0, leader=2)
    inside = [_snapshot_chunk(image, last=False), _batches(image.offset + 1, 3, [change])]
    with pytest.raises(metadata.MetadataFetchError, match="batches inside snapshot"):
        read_fetch_stream(MetadataImage.EMPTY, inside)


class _Controller:
    """Stands in for the ControllerCaller: answers MetadataFetch from a full image, as a snapshot
    from -1 and as one batch of `tail` after the offset just before it."""

    def __init__(self, before: MetadataImage, tail: list[Record]) -> None:
        self.before = before
        self.tail = tail
        self.asked: list[int] = []

    def call_stream(
        self, method: str, request: Any, response_type: Any, timeout_s: float
    ) -> Iterator[controller_pb2.MetadataFetchResponse]:
        assert method == "MetadataFetch"
        self.asked.append(request.after_offset)
        if request.after_offset == self.before.offset:
            yield _batches(self.before.offset + 1, self.before.epoch, self.tail)
            return
        image = advance(self.before, self.tail)[1]
        response = controller_pb2.MetadataFetchResponse(high_watermark=image.offset)
        response.snapshot.offset, response.snapshot.epoch = image.offset, image.epoch
        response.snapshot.records = encode_records(image.write())
        response.snapshot.last_chunk = True
        yield response


def _follower(
    tmp_path: Path, controller: _Controller, *, request_timeout_ms: int = 1000
) -> tuple[MetadataFollower, list[Any]]:
    published: list[tuple[MetadataDelta | None, MetadataImage]] = []
    follower = MetadataFollower(
        broker_id=1,
        caller=controller,  # type: ignore[arg-type]
        image_file=ImageFile(tmp_path),
        log_file=MetadataLogFile(tmp_path),
        listener=lambda delta, image: published.append((delta, image)),
        fetch_wait_ms=0,
        request_timeout_ms=request_timeout_ms,
    )
    return follower, published


def test_a_restart_loads_the_stored_image_and_fetches_only_the_tail(tmp_path: Path) -> None:
    before = cluster_image(MANY)
    ImageFile(tmp_path).write(before)
    tail: list[Record] = [PartitionChangeRecord(ORDERS_ID, 7, leader=2)]
    controller = _Controller(before, tail)
    follower, published = _follower(tmp_path, controller)
    follower.load()
    assert follower.fetch_once()
    assert controller.asked == [before.offset]
    assert follower.records_fetched == 1
    assert published[0] == (None, before)
    after = advance(before, tail)[1]
    assert published[1][1] == after
    # The tail went to the log, the image stayed: a change costs its own size on disk.
    assert ImageFile(tmp_path).read() == before
    assert MetadataLogFile(tmp_path).read(before) == after
    restarted, _ = _follower(tmp_path, controller)
    restarted.load()
    assert restarted.image == after


def test_a_torn_stored_image_means_fetching_everything(tmp_path: Path) -> None:
    before = cluster_image(MANY)
    image_file = ImageFile(tmp_path)
    image_file.write(before)
    image_file.path.write_bytes(image_file.path.read_bytes()[:-100])  # a torn write
    tail: list[Record] = [PartitionChangeRecord(ORDERS_ID, 7, leader=2)]
    controller = _Controller(before, tail)
    follower, published = _follower(tmp_path, controller)
    follower.load()
    assert published == []  # nothing from the torn image reached the broker
    assert follower.fetch_once()
    assert controller.asked == [-1]
    assert follower.records_fetched == len(advance(before, tail)[1].write())
    assert published == [(None, advance(before, tail)[1])]
    assert image_file.read() == follower.image  # a snapshot replaces the stored image


def _changes(image: MetadataImage, count: int) -> list[tuple[int, int, bytes]]:
    """`count` one-record batches after `image`, as a fetch brings them."""
    return [
        (image.offset + 1 + n, 2, encode_records([PartitionChangeRecord(ORDERS_ID, n, leader=3)]))
        for n in range(count)
    ]


def _applied(image: MetadataImage, batches: list[tuple[int, int, bytes]]) -> MetadataImage:
    records: list[Record] = [
        PartitionChangeRecord(ORDERS_ID, n, leader=3) for n in range(len(batches))
    ]
    delta, _ = advance(image, records)
    return delta.apply(offset=image.offset + len(batches), epoch=2)


def test_the_log_continues_the_image_and_a_torn_append_is_cut_at_load(tmp_path: Path) -> None:
    image = cluster_image(MANY)
    log_file = MetadataLogFile(tmp_path)
    batches = _changes(image, 3)
    log_file.append(batches[:2])
    log_file.append(batches[2:])
    assert log_file.read(image) == _applied(image, batches)
    whole = log_file.path.read_bytes()
    log_file.path.write_bytes(whole[:-3])  # the last append torn by a crash
    assert log_file.read(image) == _applied(image, batches[:2])
    assert log_file.load(image) == _applied(image, batches[:2])
    assert log_file.size_bytes() < len(whole) - 3  # cut after the last whole frame
    log_file.append(batches[2:])  # appends go on from there
    assert log_file.load(image) == _applied(image, batches)


def test_a_damaged_log_frame_or_a_gap_is_never_applied(tmp_path: Path) -> None:
    image = cluster_image(MANY)
    log_file = MetadataLogFile(tmp_path)
    batches = _changes(image, 3)
    log_file.append(batches)
    data = bytearray(log_file.path.read_bytes())
    data[-1] ^= 0x01  # the last frame's records: its checksum fails
    log_file.path.write_bytes(bytes(data))
    assert log_file.read(image) == _applied(image, batches[:2])
    # An image older than the log's first frame (the newer image was lost): a gap, nothing
    # applies, and loading empties the log.
    assert log_file.load(MetadataImage.EMPTY) == MetadataImage.EMPTY
    assert log_file.size_bytes() == 0


def test_a_long_log_is_folded_into_the_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metadata, "METADATA_LOG_BYTES_MAX", 1)
    before = cluster_image(MANY)
    ImageFile(tmp_path).write(before)
    first: list[Record] = [PartitionChangeRecord(ORDERS_ID, 7, leader=2)]
    follower, _ = _follower(tmp_path, _Controller(before, first))
    follower.load()
    assert follower.fetch_once()  # the log was empty: appended
    assert MetadataLogFile(tmp_path).size_bytes() > 0
    second: list[Record] = [PartitionChangeRecord(ORDERS_ID, 8, leader=2)]
    follower, _ = _follower(tmp_path, _Controller(follower.image, second))
    follower.load()
    assert follower.fetch_once()  # the log is past its limit: folded into the image
    assert MetadataLogFile(tmp_path).size_bytes() == 0
    assert ImageFile(tmp_path).read() == follower.image == advance(before, first + second)[1]


def test_a_fetched_snapshot_counts_as_applied_before_its_image_is_written(
    tmp_path: Path,
) -> None:
    """Writing a million-partition image takes seconds; the heartbeats report the new offset
    (which unfences the broker) once the broker acted on it, not once it is on disk: the file
    is only what a restart starts from."""
    before = cluster_image(MANY)
    controller = _Controller(before, [PartitionChangeRecord(ORDERS_ID, 7, leader=2)])
    follower, published = _follower(tmp_path, controller)
    seen_at_write: list[tuple[int, int]] = []

    class WatchedImageFile(ImageFile):
        def write(self, image: MetadataImage) -> None:
            seen_at_write.append((follower.applied_offset, len(published)))
            super().write(image)

    follower._image_file = WatchedImageFile(tmp_path)
    follower.load()
    assert follower.fetch_once()
    assert seen_at_write == [(follower.image.offset, 1)]
    assert ImageFile(tmp_path).read() == follower.image


def test_stop_waits_for_an_image_write_under_way(tmp_path: Path) -> None:
    """A clean stop leaves on disk what the broker applied, even when the write began just
    before it and outlasts stop's wait for the fetch thread (a large image takes seconds); and
    nothing is written after it."""
    before = cluster_image(MANY)
    controller = _Controller(before, [])
    # stop's join of the fetch thread gives up after 50 ms, well before the write ends.
    follower, _ = _follower(tmp_path, controller, request_timeout_ms=50)
    writing, release = threading.Event(), threading.Event()

    class SlowImageFile(ImageFile):
        def write(self, image: MetadataImage) -> None:
            writing.set()
            assert release.wait(timeout=10)
            super().write(image)

    follower._image_file = SlowImageFile(tmp_path)
    fetching = threading.Thread(target=follower.fetch_once)
    fetching.start()
    assert writing.wait(timeout=10)
    stopping = threading.Thread(target=follower.stop)
    stopping.start()
    stopping.join(timeout=1.0)
    assert stopping.is_alive()  # held by the write, long after the join gave up
    release.set()
    stopping.join(timeout=10)
    fetching.join(timeout=10)
    assert not stopping.is_alive() and not fetching.is_alive()
    assert ImageFile(tmp_path).read() == follower.image
    change: list[Record] = [PartitionChangeRecord(ORDERS_ID, 7, leader=2)]
    later = read_fetch_stream(follower.image, [_batches(follower.image.offset + 1, 1, change)])
    follower._store(later)
    assert MetadataLogFile(tmp_path).read(follower.image) == follower.image  # nothing appended
