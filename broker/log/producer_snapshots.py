"""Producer state snapshot files in a partition directory, as Kafka keeps them.

A snapshot `<20-digit offset>.snapshot` holds the producer state after every batch below that
offset (format: `producer_state`). The partition log writes one at each segment roll (named by
the new segment's base offset) and at a clean close (named by the log end offset); each is
written atomically and durably (`<name>.tmp`, fsync, rename, fsync of the directory), so a
crash leaves the old or the new file, and a stray `.tmp` is removed by the loader.

A snapshot is usable only while the log still holds every batch from the first segment's base
offset up to the snapshot's offset, and nothing that contradicts it: the log deletes snapshots
above a truncation point or a recovered log end, and those below its first segment.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from pykraft.broker.log.files import read_whole
from pykraft.broker.log.producer_state import ProducerStateManager, SnapshotCorruptError
from pykraft.broker.log.segment_names import base_offset_of, file_name
from pykraft.server_common.durable_files import replace_durably, unlink_durably

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX: Final = ".snapshot"


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / file_name(offset, SNAPSHOT_SUFFIX)


def snapshot_offsets(names: Iterable[str]) -> list[int]:
    """The offsets of the snapshot files among the file `names` of a partition directory (its
    one listing at open), in increasing order."""
    offsets = []
    for name in names:
        if name.endswith(SNAPSHOT_SUFFIX):
            offset = base_offset_of(Path(name))
            if offset is not None and name == file_name(offset, SNAPSHOT_SUFFIX):
                offsets.append(offset)
    return sorted(offsets)


def write_snapshot(
    directory: Path, state: ProducerStateManager, offset: int, *, fsync: bool = True
) -> None:
    """Stores `state` as the snapshot at `offset` (no batch may lie between the state's end
    and `offset`: the caller's log has none there); `fsync` as for `replace_durably` (a
    damaged snapshot is ignored at load). Raises OSError."""
    assert state.end_offset <= offset, (state.end_offset, offset)
    replace_durably(snapshot_path(directory, offset), state.encode_snapshot(), fsync=fsync)


def delete_snapshots(directory: Path, offsets: list[int]) -> None:
    """Removes the snapshots at `offsets`, durably. Raises OSError."""
    unlink_durably([snapshot_path(directory, offset) for offset in offsets])


def delete_snapshots_above(directory: Path, offsets: list[int], offset: int) -> list[int]:
    """Removes every snapshot above `offset` (the log was truncated or recovered to it) among
    `offsets`, the snapshots there are; returns those that remain."""
    delete_snapshots(directory, [o for o in offsets if o > offset])
    return [o for o in offsets if o <= offset]


def delete_obsolete_snapshots(
    directory: Path, offsets: list[int], *, first_segment_offset: int, log_start_offset: int
) -> list[int]:
    """After segments went: removes the snapshots no load can use any more among `offsets`,
    i.e. those below the first segment, and those older than the newest one at or below the
    log start offset (loading always starts from that one or a newer one); returns those that
    remain."""
    floor = max([o for o in offsets if o <= log_start_offset], default=first_segment_offset)
    floor = max(floor, first_segment_offset)
    delete_snapshots(directory, [o for o in offsets if o < floor])
    return [o for o in offsets if o >= floor]


def load_newest_snapshot(
    directory: Path, offsets: list[int], *, low_offset: int, high_offset: int
) -> ProducerStateManager:
    """The state of the newest snapshot among `offsets` in [`low_offset`, `high_offset`] that
    decodes (older ones are tried when a newer one is damaged, and a damaged one is deleted
    and taken out of `offsets`), or an empty state at `low_offset` (the caller then replays the
    log from there). Raises OSError."""
    assert low_offset <= high_offset, (low_offset, high_offset)
    for offset in reversed(list(offsets)):
        if not low_offset <= offset <= high_offset:
            continue
        path = snapshot_path(directory, offset)
        try:
            return ProducerStateManager.from_snapshot(read_whole(path), offset)
        except SnapshotCorruptError as error:
            log.warning("%s: ignoring producer snapshot %s: %s", directory, path.name, error)
            delete_snapshots(directory, [offset])
            offsets.remove(offset)
    return ProducerStateManager(low_offset)
