"""Where source offsets landed on the target: the history the checkpoints translate group
offsets with, and the rule for when the copier writes an offset sync.

Every source record the mirror copies, or finds already copied after a restart, is a pair
(upstream offset, downstream offset), added in order per partition. The store keeps the pairs
where the delta (downstream - upstream) changes, called run starts, and the latest pair: between
two run starts the delta is constant, so those two stand for every pair between them. The copier
writes each run start as an offset sync at once, so the synced history has the same run starts.

`translate` never skips a record: for a group positioned at source offset g it answers a target
offset at or before the copy of the first source record at or after g (exactly that copy when
the pairs around g are contiguous, as they are for a topic written only by the mirror and not
compacted in between). What it cannot know, it answers conservatively: past the latest pair,
one past the latest pair's copy. Before the oldest pair kept it answers None (no checkpoint).
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from pykraft.client import TopicPartition
from pykraft.mirror.records import OffsetSync

# Run starts kept per partition; the oldest go first (a compacted source with many gaps can
# then translate only its more recent offsets).
RUN_STARTS_MAX: Final = 1024


def translate(pairs: Sequence[OffsetSync], upstream: int) -> int | None:
    """The target position of source position `upstream`, from `pairs` (run starts then the
    latest pair, in upstream order; see the module docstring); None before the first."""
    index = bisect_right([p.upstream for p in pairs], upstream) - 1
    if index < 0:
        return None
    at = pairs[index]
    if at.upstream == upstream:
        return at.downstream
    bound = pairs[index + 1].downstream if index + 1 < len(pairs) else at.downstream + 1
    return min(at.downstream + (upstream - at.upstream), bound)


@dataclass
class _History:
    run_starts: deque[OffsetSync] = field(default_factory=lambda: deque(maxlen=RUN_STARTS_MAX))
    latest: OffsetSync | None = None

    def add(self, pair: OffsetSync) -> bool:
        """Adds the next pair; whether it starts a run. A pair at or behind the latest (the
        source or target partition was recreated, or is being copied again) drops the
        history it contradicts first."""
        latest = self.latest
        if latest is not None and (
            pair.upstream <= latest.upstream or pair.downstream <= latest.downstream
        ):
            kept = [
                p
                for p in self.run_starts
                if p.upstream < pair.upstream and p.downstream < pair.downstream
            ]
            self.run_starts = deque(kept, maxlen=RUN_STARTS_MAX)
            latest = None
        self.latest = pair
        if latest is None or pair.delta != latest.delta:
            self.run_starts.append(pair)
            return True
        return False

    def pairs(self) -> list[OffsetSync]:
        pairs = list(self.run_starts)
        if self.latest is not None and (not pairs or self.latest.upstream > pairs[-1].upstream):
            pairs.append(self.latest)
        return pairs


class OffsetSyncStore:
    """The pairs of every mirrored partition, shared by the copier (which adds) and the
    checkpoints (which translate); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._histories: dict[TopicPartition, _History] = {}

    def add(self, pairs: Iterable[OffsetSync]) -> list[bool]:
        """Adds pairs in their partitions' order; for each, whether it starts a run."""
        with self._lock:
            return [self._histories.setdefault(p.tp, _History()).add(p) for p in pairs]

    def latest(self, tp: TopicPartition) -> OffsetSync | None:
        with self._lock:
            history = self._histories.get(tp)
            return None if history is None else history.latest

    def translate(self, tp: TopicPartition, upstream: int) -> int | None:
        """`translate` over `tp`'s history; None when it has none that reaches back that far."""
        with self._lock:
            history = self._histories.get(tp)
            return None if history is None else translate(history.pairs(), upstream)


@dataclass
class SyncSchedule:
    """When one partition's copier writes an offset sync (pure; times are `now_ms`): a run
    start at once (translation needs every one), a pair `offset_lag_max` records past the last
    sync (MM2's offset.lag.max), and the latest pair once `flush_interval_ms` has passed since
    the last sync (so a quiet partition's progress is not left unsynced)."""

    offset_lag_max: int
    flush_interval_ms: int
    last_synced: OffsetSync | None = None
    last_synced_ms: int = 0

    def on_pair(self, pair: OffsetSync, run_start: bool, now_ms: int) -> bool:
        """Whether `pair`, just added, is to be written now (and is then taken as written)."""
        last = self.last_synced
        if run_start or last is None or pair.upstream - last.upstream >= self.offset_lag_max:
            self._synced(pair, now_ms)
            return True
        return False

    def on_tick(self, latest: OffsetSync | None, now_ms: int, *, force: bool = False) -> bool:
        """Whether the latest pair is to be written now: the flush interval has passed since
        the last sync, or `force` (a clean stop)."""
        if latest is None or latest == self.last_synced:
            return False
        if not force and now_ms - self.last_synced_ms < self.flush_interval_ms:
            return False
        self._synced(latest, now_ms)
        return True

    def _synced(self, pair: OffsetSync, now_ms: int) -> None:
        self.last_synced = pair
        self.last_synced_ms = now_ms
