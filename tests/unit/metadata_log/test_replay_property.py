"""The issue's property: a snapshot at any cut, followed by the tail of the log, gives the same
image as replaying the whole log record by record."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.metadata_log.codec import decode_records, encode_records
from pykraft.metadata_log.delta import MetadataDelta, replay_all
from pykraft.metadata_log.image import MetadataImage
from pykraft.metadata_log.records import Record
from tests.unit.metadata_log.strategies import valid_histories

_SETTINGS = settings(max_examples=100, deadline=None)


def _epoch_of(offset: int, epoch_length: int) -> int:
    """Leader epochs go up every `epoch_length` records, as when leadership moves."""
    return 1 + offset // epoch_length


def _replay_each(
    image: MetadataImage, records: list[Record], epoch_length: int
) -> list[MetadataImage]:
    """The image after each record, each record in its own delta; `[image]` first."""
    images = [image]
    for record in records:
        delta = MetadataDelta(images[-1])
        delta.replay(record)
        offset = images[-1].offset + 1
        images.append(delta.apply(offset=offset, epoch=_epoch_of(offset, epoch_length)))
    return images


def _replay_batch(image: MetadataImage, records: list[Record], epoch_length: int) -> MetadataImage:
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)
    if not records:
        return delta.apply(offset=image.offset, epoch=image.epoch)
    offset = image.offset + len(records)
    return delta.apply(offset=offset, epoch=_epoch_of(offset, epoch_length))


@_SETTINGS
@given(history=valid_histories(), epoch_length=st.integers(1, 10), data=st.data())
def test_snapshot_at_any_cut_then_tail_equals_full_replay(
    history: list[Record], epoch_length: int, data: st.DataObject
) -> None:
    images = _replay_each(MetadataImage.EMPTY, history, epoch_length)
    final = images[-1]
    cut = data.draw(st.integers(0, len(history)), label="cut")
    at_cut = images[cut]

    snapshot = at_cut.write()
    assert decode_records(encode_records(snapshot)) == snapshot
    restored = replay_all(MetadataImage.EMPTY, decode_records(encode_records(snapshot))).apply(
        offset=at_cut.offset, epoch=at_cut.epoch
    )
    assert restored == at_cut
    assert restored.write() == snapshot

    tail = history[cut:]
    assert _replay_each(restored, tail, epoch_length)[-1] == final
    assert _replay_batch(restored, tail, epoch_length) == final


@_SETTINGS
@given(history=valid_histories())
def test_one_delta_for_the_whole_history_equals_record_by_record(history: list[Record]) -> None:
    one_by_one = _replay_each(MetadataImage.EMPTY, history, epoch_length=len(history) + 1)[-1]
    assert _replay_batch(MetadataImage.EMPTY, history, epoch_length=len(history) + 1) == one_by_one
