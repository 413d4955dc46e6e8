"""The leader-epoch cache: at which offset each leader epoch began (Kafka's LeaderEpochFileCache).

KIP-101: a follower that asks "where does my latest epoch end on the leader?" truncates to the
answer instead of to its high watermark, which loses no acknowledged record. The cache holds
(epoch, start offset) entries with both increasing strictly, and is persisted to the
`leader-epoch-checkpoint` file on every change, before the caller goes on.

Callers may rely on:
- `assign` ignores an epoch it already has at an earlier or equal start, and (as Kafka) drops
  entries that a new entry contradicts (an epoch at or above it, or a start at or above it).
- `end_offset_for` answers OffsetForLeaderEpoch exactly as Kafka does (see its docstring).
- The partition log rebuilds entries from the batches themselves when it recovers segments, so a
  checkpoint lost in a crash costs nothing (every batch carries its leader epoch).
"""

from __future__ import annotations

import itertools
from bisect import bisect_left, bisect_right
from typing import Final

from pykraft.broker.log.checkpoints import EpochEntry, LeaderEpochCheckpointFile

UNDEFINED_EPOCH: Final = -1
UNDEFINED_EPOCH_OFFSET: Final = -1


class LeaderEpochCache:
    """Entries (epoch, start offset) in memory and in their checkpoint file."""

    def __init__(self, checkpoint: LeaderEpochCheckpointFile) -> None:
        self._checkpoint = checkpoint
        self._entries: list[EpochEntry] = checkpoint.read()

    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, or UNDEFINED_EPOCH (-1) when the cache is empty."""
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Records that `epoch` began at `start_offset`; True if the cache changed (and was
        persisted). A negative epoch (a batch no leader stamped) is ignored."""
        if epoch < 0:
            return False
        latest = self._entries[-1] if self._entries else None
        if latest is not None and latest.epoch == epoch and latest.start_offset <= start_offset:
            return False
        kept = [
            entry
            for entry in self._entries
            if entry.epoch < epoch and entry.start_offset < start_offset
        ]
        self._replace([*kept, EpochEntry(epoch, start_offset)])
        return True

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch of the leader that wrote `offset`, or UNDEFINED_EPOCH if it is older than
        every entry."""
        slot = bisect_right([entry.start_offset for entry in self._entries], offset) - 1
        return self._entries[slot].epoch if slot >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest known epoch <= `requested_epoch`, the offset where it ended), Kafka's
        OffsetForLeaderEpoch answer:

        - the latest epoch ends at the log end offset;
        - an older epoch ends where the next larger known epoch starts;
        - an epoch below every known one answers (requested epoch, first entry's start);
        - an unknown epoch above the latest, or an empty cache, answers (-1, -1).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return requested_epoch, log_end_offset
        epochs = [entry.epoch for entry in self._entries]
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = higher - 1
        if floor < 0:
            return requested_epoch, self._entries[higher].start_offset
        return self._entries[floor].epoch, self._entries[higher].start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """Forgets epochs that began at `end_offset` or later (the log was cut there)."""
        starts = [entry.start_offset for entry in self._entries]
        keep = bisect_left(starts, end_offset)
        if keep < len(self._entries):
            self._replace(self._entries[:keep])

    def truncate_from_start(self, start_offset: int) -> None:
        """Moves the log start: the epoch in force at `start_offset` now starts there, and the
        epochs that ended before it are forgotten."""
        starts = [entry.start_offset for entry in self._entries]
        covering = bisect_right(starts, start_offset) - 1
        if covering < 0 or (covering == 0 and starts[0] == start_offset):
            return
        moved = EpochEntry(self._entries[covering].epoch, start_offset)
        self._replace([moved, *self._entries[covering + 1 :]])

    def restore(self, entries: tuple[EpochEntry, ...]) -> None:
        """Puts back entries taken with `entries()` (undoing a failed append)."""
        if tuple(self._entries) != entries:
            self._replace(list(entries))

    def clear(self) -> None:
        if self._entries:
            self._replace([])

    def _replace(self, entries: list[EpochEntry]) -> None:
        """Persists first, so memory never runs ahead of the file after an I/O error."""
        for earlier, later in itertools.pairwise(entries):
            assert earlier.epoch < later.epoch and earlier.start_offset < later.start_offset
        self._checkpoint.write(entries)
        self._entries = entries
