"""The copy loop: records of the source partitions to the same partitions of their remote
topics, with keys, values, headers and timestamps unchanged, in order per partition.

One consumer reads the source; one idempotent producer (acks=all) writes the target, so a retry
after a lost answer is never written twice and a partition's records keep their order. Each
acknowledged record is a pair (source offset, target offset) for the `OffsetSyncStore`, and some
pairs (see `SyncSchedule`) are written as offset syncs to the target, after the record itself:
the last sync of a partition is where a restart resumes (see `resume` for how the records
written after it are recognised rather than written again).

A record that fails for good (the producer gave up after delivery.timeout.ms, or the target
refused it) stops the copier with its error rather than leave a hole: a restart resumes at the
last sync. The records not yet acknowledged are bounded by the producer's buffer_memory, which
blocks `send` when full.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from pykraft.client import (
    Consumer,
    ConsumerRecord,
    FutureRecordMetadata,
    Producer,
    TopicPartition,
    UnknownTopicOrPartitionError,
)
from pykraft.mirror.offset_syncs import OffsetSyncStore, SyncSchedule
from pykraft.mirror.records import OffsetSync
from pykraft.mirror.resume import TailMatcher, read_tails

log = logging.getLogger(__name__)

# The offset-sync topic has one partition (as MM2's), so syncs stay in the order written.
SYNCS_PARTITION: Final = 0
# How long a restart may take to read the target's tails back.
TAIL_READ_TIMEOUT_MS: Final = 120_000


@dataclass
class _Copying:
    """One source partition being copied."""

    target: TopicPartition
    matcher: TailMatcher
    schedule: SyncSchedule
    # Records sent and not yet acknowledged, in order: (source offset, its future).
    pending: deque[tuple[int, FutureRecordMetadata]] = field(default_factory=deque)
    # Pairs already on the target (matched with the tail) and not yet handed to the store.
    matched: list[OffsetSync] = field(default_factory=list)

    def acknowledged(self, tp: TopicPartition) -> Iterator[OffsetSync]:
        """The pairs done since the last call, in order; raises a failed record's error."""
        yield from self.matched
        self.matched = []
        pending = self.pending
        while pending and pending[0][1].done():
            source_offset, future = pending.popleft()
            yield OffsetSync(tp, source_offset, future.result().offset)


class PartitionCopier:
    """Copies the source partitions it is given (`assign`); used from one thread."""

    def __init__(
        self,
        *,
        consumer: Consumer,
        tail_consumer: Consumer,
        producer: Producer,
        store: OffsetSyncStore,
        syncs_topic: str,
        offset_lag_max: int,
        flush_interval_ms: int,
        on_source_topic_gone: Callable[[], None],
    ) -> None:
        """`on_source_topic_gone` is called when polling finds a source topic deleted (its
        partitions stay assigned until `assign` drops them)."""
        self._on_source_topic_gone = on_source_topic_gone
        self._consumer = consumer
        self._tail_consumer = tail_consumer
        self._producer = producer
        self._store = store
        self._syncs_topic = syncs_topic
        self._offset_lag_max = offset_lag_max
        self._flush_interval_ms = flush_interval_ms
        self._partitions: dict[TopicPartition, _Copying] = {}
        self._sync_futures: deque[FutureRecordMetadata] = deque()

    @property
    def copying(self) -> bool:
        """Whether any partition is assigned."""
        return bool(self._partitions)

    def assign(self, wanted: Mapping[TopicPartition, TopicPartition], now_ms: int) -> None:
        """Copies exactly the source partitions of `wanted` (source -> target partition) from
        now on: new ones resume after their last offset sync, once the target's records after
        it are read back; dropped ones stop (what was sent for them is still delivered)."""
        for tp in set(self._partitions) - set(wanted):
            del self._partitions[tp]
        added = {tp: target for tp, target in wanted.items() if tp not in self._partitions}
        starts = self._start(added, now_ms)
        self._consumer.assign(wanted)
        for tp, start in starts.items():
            if start is None:
                self._consumer.seek_to_beginning([tp])
            else:
                self._consumer.seek(tp, start)

    def _start(
        self, added: Mapping[TopicPartition, TopicPartition], now_ms: int
    ) -> dict[TopicPartition, int | None]:
        """Reads the added partitions' tails and sets them up; where each resumes on the
        source (None: its log start)."""
        latest = {tp: self._store.latest(tp) for tp in added}
        tail_starts: dict[TopicPartition, int | None] = {}
        for tp, target in added.items():
            last = latest[tp]
            tail_starts[target] = None if last is None else last.downstream + 1
        tails = read_tails(self._tail_consumer, tail_starts, TAIL_READ_TIMEOUT_MS)
        starts: dict[TopicPartition, int | None] = {}
        for tp, target in added.items():
            last = latest[tp]
            schedule = SyncSchedule(self._offset_lag_max, self._flush_interval_ms, last, now_ms)
            self._partitions[tp] = _Copying(target, TailMatcher(tails[target]), schedule)
            starts[tp] = None if last is None else last.upstream + 1
            log.info(
                "copying %s to %s from %s, %d records on the target to check first",
                tp,
                target,
                "its start" if last is None else f"offset {last.upstream + 1}",
                len(tails[target]),
            )
        return starts

    def copy(self, poll_timeout_ms: int, now_ms: int) -> int:
        """One round: polls the source, sends what is new, hands the acknowledged pairs to the
        store and writes the offset syncs due. The number of records polled; a source topic
        found deleted calls `on_source_topic_gone` instead."""
        try:
            records = self._consumer.poll(poll_timeout_ms)
        except UnknownTopicOrPartitionError as e:
            log.warning("a source topic is gone: %s", e)
            self._on_source_topic_gone()
            records = []
        for record in records:
            self._copy_record(record)
        self.settle(now_ms)
        return len(records)

    def _copy_record(self, record: ConsumerRecord) -> None:
        tp = TopicPartition(record.topic, record.partition)
        copying = self._partitions.get(tp)
        if copying is None:
            return  # dropped while its records were buffered
        matched = copying.matcher.match(record)
        if matched is not None:
            copying.matched.append(OffsetSync(tp, record.offset, matched))
            return
        target = copying.target
        future = self._producer.send(
            target.topic,
            record.value,
            record.key,
            target.partition,
            record.headers,
            record.timestamp,
        )
        copying.pending.append((record.offset, future))

    def settle(self, now_ms: int, *, final: bool = False) -> None:
        """Hands the pairs acknowledged so far to the store and writes the syncs due (`final`:
        every partition's latest pair not yet synced); raises the error of a record or sync
        that failed."""
        pairs = [pair for tp, c in self._partitions.items() for pair in c.acknowledged(tp)]
        for pair, run_start in zip(pairs, self._store.add(pairs), strict=True):
            if self._partitions[pair.tp].schedule.on_pair(pair, run_start, now_ms):
                self._write_sync(pair)
        for tp, copying in self._partitions.items():
            latest = self._store.latest(tp)
            if copying.schedule.on_tick(latest, now_ms, force=final) and latest is not None:
                self._write_sync(latest)
        while self._sync_futures and self._sync_futures[0].done():
            self._sync_futures.popleft().result()

    def _write_sync(self, pair: OffsetSync) -> None:
        future = self._producer.send(
            self._syncs_topic, pair.value(), pair.key(), partition=SYNCS_PARTITION
        )
        self._sync_futures.append(future)

    def close(self, timeout_s: float, now_ms: int) -> None:
        """Delivers what was sent, then writes and delivers each partition's latest sync, so a
        clean stop leaves nothing for the next start to check."""
        self._producer.flush(timeout_s)
        self.settle(now_ms, final=True)
        self._producer.flush(timeout_s)
        self.settle(now_ms)
