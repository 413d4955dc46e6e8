"""The leader-epoch cache: Kafka's assign rules, OffsetForLeaderEpoch answers (KIP-101), the
two truncations, and persistence of every change to leader-epoch-checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.broker.log.checkpoints import EpochEntry, LeaderEpochCheckpointFile
from pykraft.broker.log.leader_epochs import LeaderEpochCache


def _cache(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint"))
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def _entries(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(entry.epoch, entry.start_offset) for entry in cache.entries()]


def test_every_change_is_persisted(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 0), (3, 10))
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n3 10\n"
    assert _entries(_cache(tmp_path)) == [(1, 0), (3, 10)]
    cache.truncate_from_end(10)
    assert _entries(_cache(tmp_path)) == [(1, 0)]


def test_assign_ignores_the_same_epoch_later_and_negative_epochs(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 0))
    assert not cache.assign(1, 5)
    assert not cache.assign(-1, 7)
    assert cache.assign(2, 8)
    assert _entries(cache) == [(1, 0), (2, 8)]
    assert cache.latest_epoch == 2


def test_assign_drops_entries_a_new_one_contradicts(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 0), (2, 10), (4, 20))
    cache.assign(3, 15)  # an epoch below the latest at a later offset: Kafka keeps it monotonic
    assert _entries(cache) == [(1, 0), (2, 10), (3, 15)]
    cache.assign(3, 12)  # the same epoch starting earlier moves its start back
    assert _entries(cache) == [(1, 0), (2, 10), (3, 12)]


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (5, (5, 30)),  # the latest epoch ends at the log end
        (4, (3, 20)),  # unknown epoch between known ones: the one below, ending at the next start
        (3, (3, 20)),
        (2, (1, 10)),
        (1, (1, 10)),
        (0, (0, 0)),  # below every epoch: the requested one, ending where the first starts
        (6, (-1, -1)),  # above the latest
        (-1, (-1, -1)),
    ],
)
def test_end_offset_for_matches_kafka(
    tmp_path: Path, requested: int, expected: tuple[int, int]
) -> None:
    cache = _cache(tmp_path, (1, 0), (3, 10), (5, 20))
    assert cache.end_offset_for(requested, log_end_offset=30) == expected


def test_empty_cache_knows_no_epoch(tmp_path: Path) -> None:
    assert _cache(tmp_path).end_offset_for(0, log_end_offset=0) == (-1, -1)
    assert _cache(tmp_path).latest_epoch == -1


def test_truncate_from_end_forgets_epochs_starting_at_or_after(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 0), (3, 10), (5, 20))
    cache.truncate_from_end(21)
    assert _entries(cache) == [(1, 0), (3, 10), (5, 20)]
    cache.truncate_from_end(20)
    assert _entries(cache) == [(1, 0), (3, 10)]
    cache.truncate_from_end(0)
    assert _entries(cache) == []


def test_truncate_from_start_moves_the_covering_epoch_to_the_new_start(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 0), (3, 10), (5, 20))
    cache.truncate_from_start(0)
    assert _entries(cache) == [(1, 0), (3, 10), (5, 20)]
    cache.truncate_from_start(15)
    assert _entries(cache) == [(3, 15), (5, 20)]
    cache.truncate_from_start(20)
    assert _entries(cache) == [(5, 20)]
    assert cache.epoch_for_offset(19) == -1 and cache.epoch_for_offset(25) == 5


def test_restore_puts_back_a_snapshot(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 0))
    snapshot = cache.entries()
    cache.assign(2, 5)
    cache.restore(snapshot)
    assert cache.entries() == (EpochEntry(1, 0),)
    assert _entries(_cache(tmp_path)) == [(1, 0)]
