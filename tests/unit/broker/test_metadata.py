from __future__ import annotations

from pathlib import Path

from pykraft.broker.metadata import ImageFile, apply_fetch_response
from pykraft.metadata_log import MetadataImage, encode_records
from pykraft.metadata_log.records import PartitionChangeRecord
from pykraft.proto import controller_pb2

from .images import ORDERS_ID, advance, cluster_image, topic_records

ORDERS = topic_records("orders", ORDERS_ID, [(1, 2)])


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


def test_a_damaged_image_file_means_fetching_everything_again(tmp_path: Path) -> None:
    image_file = ImageFile(tmp_path)
    image_file.write(cluster_image(ORDERS))
    data = bytearray(image_file.path.read_bytes())
    data[-1] ^= 0xFF
    image_file.path.write_bytes(bytes(data))
    assert image_file.read() == MetadataImage.EMPTY
    image_file.path.write_bytes(b"\x00")
    assert image_file.read() == MetadataImage.EMPTY


def test_batches_apply_as_one_delta_skipping_records_already_applied() -> None:
    image = cluster_image(ORDERS)
    change = PartitionChangeRecord(ORDERS_ID, 0, leader=2)
    response = controller_pb2.MetadataFetchResponse(high_watermark=image.offset + 1)
    # The batch starts one record before the image's offset: that record is skipped.
    response.batches.add(
        base_offset=image.offset, epoch=3, records=encode_records([ORDERS[-1], change])
    )
    delta, applied = apply_fetch_response(image, response)
    assert delta is not None and delta.image is image
    assert (applied.offset, applied.epoch) == (image.offset + 1, 3)
    assert applied.topics.get(ORDERS_ID).partitions[0].leader == 2  # type: ignore[union-attr]
    assert advance(image, [change])[1].topics == applied.topics


def test_a_snapshot_replaces_the_image_and_gives_no_delta() -> None:
    image = cluster_image(ORDERS)
    response = controller_pb2.MetadataFetchResponse(high_watermark=image.offset)
    response.snapshot.offset, response.snapshot.epoch = image.offset, image.epoch
    response.snapshot.records = encode_records(image.write())
    delta, applied = apply_fetch_response(MetadataImage.EMPTY, response)
    assert delta is None and applied == image


def test_an_empty_answer_changes_nothing() -> None:
    image = cluster_image()
    delta, applied = apply_fetch_response(image, controller_pb2.MetadataFetchResponse())
    assert applied is image
    assert delta is not None


def test_the_image_file_creates_its_directory_durably(
    tmp_path: Path, fsynced_paths: list[Path]
) -> None:
    """A power loss after the first write must not lose the directory the image lives in: every
    directory the write creates is fsynced in its parent, as the partition log's are."""
    image_file = ImageFile(tmp_path / "logs" / "__cluster_metadata")
    image_file.write(cluster_image(ORDERS))
    for directory in (tmp_path, tmp_path / "logs", tmp_path / "logs" / "__cluster_metadata"):
        assert directory in fsynced_paths, f"{directory} was not fsynced"
