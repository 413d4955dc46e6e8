"""Offset syncs and checkpoints in MM2's byte layouts (Kafka protocol STRING, big-endian
integers), so MM2's own readers take them."""

from __future__ import annotations

import pytest

from pykraft.client import TopicPartition
from pykraft.mirror.records import Checkpoint, OffsetSync


def test_offset_sync_bytes_are_mm2s() -> None:
    sync = OffsetSync(TopicPartition("ab", 3), 5, 7)
    assert sync.key() == b"\x00\x02ab\x00\x00\x00\x03"
    assert sync.value() == (5).to_bytes(8, "big") + (7).to_bytes(8, "big")
    assert OffsetSync.decode(sync.key(), sync.value()) == sync
    assert sync.delta == 2


def test_checkpoint_bytes_are_mm2s() -> None:
    checkpoint = Checkpoint("g", TopicPartition("east.t", 1), 10, 9, "meta")
    assert checkpoint.key() == b"\x00\x01g\x00\x06east.t\x00\x00\x00\x01"
    assert checkpoint.value() == (
        b"\x00\x00" + (10).to_bytes(8, "big") + (9).to_bytes(8, "big") + b"\x00\x04meta"
    )
    assert Checkpoint.decode(checkpoint.key(), checkpoint.value()) == checkpoint


def test_unicode_names_count_bytes() -> None:
    sync = OffsetSync(TopicPartition("é", 0), 0, 0)
    assert sync.key()[:2] == b"\x00\x02"
    assert OffsetSync.decode(sync.key(), sync.value()) == sync


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"\x00\x05ab", b""),  # a string longer than the key
        (b"\x00\x02ab\x00\x00\x00\x03", b"\x00" * 15),  # a short value
        (b"\x00\x02ab\x00\x00\x00\x03\x00", b"\x00" * 16),  # bytes after the key
    ],
)
def test_malformed_offset_syncs_are_refused(key: bytes, value: bytes) -> None:
    with pytest.raises(ValueError):
        OffsetSync.decode(key, value)


def test_checkpoints_of_an_unknown_version_are_refused() -> None:
    checkpoint = Checkpoint("g", TopicPartition("t", 0), 1, 1)
    with pytest.raises(ValueError, match="version 1"):
        Checkpoint.decode(checkpoint.key(), b"\x00\x01" + checkpoint.value()[2:])
