"""Checkpoints: which group offsets are translated and written, and which are committed on the
target for an idle group (MM2's rules; issue 15 §2.4)."""

from __future__ import annotations

from pykraft.client import OffsetAndMetadata
from pykraft.client import TopicPartition as TP
from pykraft.mirror.checkpoints import is_newer, offsets_to_sync, translated_checkpoints
from pykraft.mirror.offset_syncs import OffsetSyncStore
from pykraft.mirror.records import Checkpoint, OffsetSync

SOURCE, TARGET = TP("orders", 0), TP("east.orders", 0)


def checkpoint(upstream: int, downstream: int) -> Checkpoint:
    return Checkpoint("g", TARGET, upstream, downstream)


def test_a_checkpoint_is_written_first_on_a_rewind_or_when_it_moves_forward() -> None:
    assert is_newer(checkpoint(5, 5), None)
    assert is_newer(checkpoint(6, 6), checkpoint(5, 5))
    assert is_newer(checkpoint(3, 3), checkpoint(5, 5))  # the group moved back on the source
    assert not is_newer(checkpoint(5, 5), checkpoint(5, 5))
    assert not is_newer(checkpoint(7, 4), checkpoint(5, 5))  # would move the target back


def test_offsets_of_mirrored_partitions_the_syncs_cover_are_translated() -> None:
    store = OffsetSyncStore()
    store.add([OffsetSync(SOURCE, 10, 0), OffsetSync(SOURCE, 11, 1)])
    offsets = {
        SOURCE: OffsetAndMetadata(11, "m"),
        TP("orders", 1): OffsetAndMetadata(3),  # no syncs yet
        TP("other", 0): OffsetAndMetadata(3),  # not mirrored
    }
    mirrored = {SOURCE: TARGET, TP("orders", 1): TP("east.orders", 1)}
    assert translated_checkpoints("g", offsets, mirrored, store) == [
        Checkpoint("g", TARGET, 11, 1, "m")
    ]


def test_only_checkpoints_ahead_of_the_targets_offsets_are_committed() -> None:
    behind, ahead, new = TP("t", 0), TP("t", 1), TP("t", 2)
    checkpoints = [
        Checkpoint("g", behind, 9, 9),
        Checkpoint("g", ahead, 9, 9, "meta"),
        Checkpoint("g", new, 4, 4),
    ]
    target = {behind: OffsetAndMetadata(12), ahead: OffsetAndMetadata(3)}
    assert offsets_to_sync(checkpoints, target) == {
        ahead: OffsetAndMetadata(9, "meta"),
        new: OffsetAndMetadata(4),
    }
