"""Consumer groups across the mirror (MM2's MirrorCheckpointConnector): the committed offsets of
the source's groups, translated to the target and written as checkpoints, and with
`sync.group.offsets.enabled` committed for the groups that have no members on the target, so a
group can move to the target and resume there.

Translation goes through the `OffsetSyncStore` (which never skips a record; see there). A
checkpoint is written when it is a group's first for the partition, when the group moved back
on the source, or when its translation moved forward: never backwards on the target otherwise
(MM2's rule). A group is committed on the target only where the target has no offset for the
partition or one behind the checkpoint, and only while the group has no members there; the
coordinator refuses an admin commit to a group with members (UnknownMemberIdError), which
closes the race with a consumer joining meanwhile. A group that resumes on the target then
reprocesses at most what it consumed on the source after the last checkpoint, so at most one
emit.checkpoints.interval.seconds of its progress.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Final

from pykraft.client import (
    AdminClient,
    GroupIdNotFoundError,
    GroupState,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
    UnknownMemberIdError,
)
from pykraft.mirror.config import NameFilter
from pykraft.mirror.offset_syncs import OffsetSyncStore
from pykraft.mirror.records import Checkpoint

log = logging.getLogger(__name__)

_IDLE_STATES: Final = frozenset({GroupState.EMPTY, GroupState.DEAD})
# How long `emit` waits for its checkpoints to be written (the producer's own delivery timeout
# bounds it too).
CHECKPOINT_WRITE_TIMEOUT_S: Final = 120.0


def is_newer(checkpoint: Checkpoint, last: Checkpoint | None) -> bool:
    """Whether `checkpoint` is to be written, `last` being the group's last for the partition."""
    if last is None:
        return True
    return checkpoint.upstream < last.upstream or checkpoint.downstream > last.downstream


def translated_checkpoints(
    group: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    mirrored: Mapping[TopicPartition, TopicPartition],
    store: OffsetSyncStore,
) -> list[Checkpoint]:
    """A checkpoint for each offset of a mirrored partition that the store can translate."""
    checkpoints = []
    for tp, committed in sorted(offsets.items()):
        target = mirrored.get(tp)
        downstream = None if target is None else store.translate(tp, committed.offset)
        if target is not None and downstream is not None:
            checkpoints.append(
                Checkpoint(group, target, committed.offset, downstream, committed.metadata)
            )
    return checkpoints


def offsets_to_sync(
    checkpoints: Iterable[Checkpoint], target_offsets: Mapping[TopicPartition, OffsetAndMetadata]
) -> dict[TopicPartition, OffsetAndMetadata]:
    """What to commit on the target for one idle group: the checkpoints ahead of its offsets."""
    return {
        c.tp: OffsetAndMetadata(c.downstream, c.metadata)
        for c in checkpoints
        if c.tp not in target_offsets or target_offsets[c.tp].offset < c.downstream
    }


class Checkpointer:
    """Emits checkpoints and syncs idle groups' offsets; one thread uses it."""

    def __init__(
        self,
        *,
        source: AdminClient,
        target: AdminClient,
        producer: Producer,
        store: OffsetSyncStore,
        checkpoints_topic: str,
        groups: NameFilter,
    ) -> None:
        self._source = source
        self._target = target
        self._producer = producer
        self._store = store
        self._topic = checkpoints_topic
        self._groups = groups
        self._last: dict[tuple[str, TopicPartition], Checkpoint] = {}

    def load(self, checkpoints: Iterable[Checkpoint]) -> None:
        """The checkpoints written before (read back from the topic at start), in order."""
        for checkpoint in checkpoints:
            self._last[(checkpoint.group, checkpoint.tp)] = checkpoint

    def emit(self, mirrored: Mapping[TopicPartition, TopicPartition]) -> int:
        """Writes the new checkpoints of every source group `groups` passes, and waits until
        they are; how many."""
        written = []
        for listing in self._source.list_consumer_groups():
            if not self._groups.matches(listing.group_id):
                continue
            offsets = self._source.list_consumer_group_offsets(listing.group_id)
            for checkpoint in translated_checkpoints(
                listing.group_id, offsets, mirrored, self._store
            ):
                key = (checkpoint.group, checkpoint.tp)
                if is_newer(checkpoint, self._last.get(key)):
                    written.append(
                        self._producer.send(self._topic, checkpoint.value(), checkpoint.key())
                    )
                    self._last[key] = checkpoint
        for future in written:
            future.result(CHECKPOINT_WRITE_TIMEOUT_S)
        return len(written)

    def sync_group_offsets(self) -> None:
        """Commits on the target the checkpoints ahead of each group without members there."""
        by_group: dict[str, list[Checkpoint]] = {}
        for (group, _), checkpoint in self._last.items():
            by_group.setdefault(group, []).append(checkpoint)
        for group, checkpoints in sorted(by_group.items()):
            if not self._idle_on_target(group):
                continue
            offsets = offsets_to_sync(checkpoints, self._target.list_consumer_group_offsets(group))
            if not offsets:
                continue
            try:
                self._target.alter_consumer_group_offsets(group, offsets)
            except UnknownMemberIdError:
                log.info("group %s gained members on the target: its offsets are left", group)
                continue
            log.info("committed %d offsets of group %s on the target", len(offsets), group)

    def _idle_on_target(self, group: str) -> bool:
        try:
            described = self._target.describe_consumer_groups(group)[group]
        except GroupIdNotFoundError:
            return True
        return described.state in _IDLE_STATES
