"""What `pykraft mirror status` shows per mirrored source partition: the source's end offset,
the mirrored offset, the lag between them, and the records mirrored per second over the last
minute. It works from the clusters alone (running mirror or not): the mirrored offset is the
one after the partition's last offset sync on the target, so it trails the copying by at most
offset.lag.max records or offset.flush.interval.ms; the rate is the mirrored offset's progress
over the minute, from the syncs' timestamps.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from pykraft.client import AdminClient, Consumer, TopicPartition
from pykraft.mirror.config import MirrorConfig
from pykraft.mirror.topic_reader import TimedSync, read_offset_syncs
from pykraft.mirror.topic_sync import mirrored_topics

RATE_WINDOW_MS: Final = 60_000


@dataclass(frozen=True)
class PartitionStatus:
    """One source partition: `mirrored` and `lag` are None before its first offset sync."""

    tp: TopicPartition
    remote_topic: str
    source_end: int
    mirrored: int | None
    records_per_s: float

    @property
    def lag(self) -> int | None:
        return None if self.mirrored is None else max(0, self.source_end - self.mirrored)


def mirrored_at(syncs: Sequence[TimedSync], time_ms: int) -> int | None:
    """The offset after the last sync written at or before `time_ms` (syncs in write order,
    one partition's); None when none was."""
    index = bisect_right([s.timestamp_ms for s in syncs], time_ms) - 1
    return None if index < 0 else syncs[index].sync.upstream + 1


def records_per_s(syncs: Sequence[TimedSync], now_ms: int, window_ms: int) -> float:
    """Records mirrored per second over the `window_ms` before `now_ms`: the mirrored offset's
    progress (from where copying began, if that was within the window)."""
    end = mirrored_at(syncs, now_ms)
    if end is None:
        return 0.0
    start = mirrored_at(syncs, now_ms - window_ms)
    if start is None:
        start = syncs[0].sync.upstream
    return max(0, end - start) * 1000 / window_ms


def partition_statuses(
    remote_topics: Mapping[TopicPartition, str],
    source_ends: Mapping[TopicPartition, int],
    syncs: Sequence[TimedSync],
    now_ms: int,
) -> list[PartitionStatus]:
    """The status of each source partition of `remote_topics` (source -> remote topic name),
    from every offset sync written; sorted by partition."""
    by_partition: dict[TopicPartition, list[TimedSync]] = {}
    for timed in syncs:
        by_partition.setdefault(timed.sync.tp, []).append(timed)
    statuses = []
    for tp in sorted(remote_topics):
        own = by_partition.get(tp, [])
        statuses.append(
            PartitionStatus(
                tp,
                remote_topics[tp],
                source_ends[tp],
                mirrored_at(own, now_ms) if own else None,
                records_per_s(own, now_ms, RATE_WINDOW_MS),
            )
        )
    return statuses


def read_status(
    source: AdminClient,
    target: AdminClient,
    target_consumer: Consumer,
    config: MirrorConfig,
    *,
    now_ms: int,
    timeout_ms: int,
) -> list[PartitionStatus]:
    """The status of every partition the mirror copies now, asked of both clusters (`now_ms`
    is wall-clock time, as the syncs' timestamps are)."""
    policy = config.policy()
    remote_topics = {
        TopicPartition(t.name, p.partition): policy.remote_topic(t.name)
        for t in mirrored_topics(source.describe_topics(), config, policy)
        for p in t.partitions
    }
    ends = source.list_offsets(dict.fromkeys(remote_topics, "latest"))
    syncs_topic = policy.offset_syncs_topic()
    syncs = []
    if syncs_topic in target.list_topics():  # else the mirror has not started yet
        syncs = read_offset_syncs(target_consumer, syncs_topic, timeout_ms)
    source_ends = {tp: result.offset for tp, result in ends.items()}
    return partition_statuses(remote_topics, source_ends, syncs, now_ms)
