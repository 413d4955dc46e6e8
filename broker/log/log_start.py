"""The log start offset of a partition log and what moves it forward: Kafka's DeleteRecords and
retention pass (UnifiedLog's deleteOldSegments and maybeIncrementLogStartOffset). Which of the
oldest segments may go is `retention`'s rule; this module carries it out.

What a caller may rely on:
- `offset` only grows, except by `reset_at` (the log emptied and started afresh there, by a
  truncation).
- Moving it forward stages its checkpoint (stored at once only for DeleteRecords, which a
  client was told happened; retention's segments are gone anyway, so a stale one is
  harmless), moves the leader-epoch cache's start with it, and deletes the segments wholly
  below it and the producer snapshots no load can use (the producers stay, as in Kafka).
  Never the active segment, never data at or above the high watermark.
- A storage error halfway takes the log offline (`LocalLog.failing_on_error`).

Threads: no lock of its own. The caller (`PartitionLog`) holds its log lock for every call and
has checked the log writable. Deleting segments takes `LocalLog.exclusive()` here and moves
`offset` inside it, so a reader under `LocalLog.reading()` sees a log start and segments that
belong together.
"""

from __future__ import annotations

from pykraft.broker.log.config import LogConfig
from pykraft.broker.log.dir_checkpoints import CheckpointSlot
from pykraft.broker.log.errors import LogError
from pykraft.broker.log.leader_epochs import LeaderEpochCache
from pykraft.broker.log.local_log import LocalLog
from pykraft.broker.log.partition_producers import PartitionProducers
from pykraft.broker.log.retention import deletable_prefix
from pykraft.proto import common_pb2


class LogStart:
    """The log start offset of one partition log, with the parts of the log that follow it."""

    def __init__(
        self,
        offset: int,
        *,
        checkpoint: CheckpointSlot,
        local: LocalLog,
        epochs: LeaderEpochCache,
        producers: PartitionProducers,
    ) -> None:
        self.offset = offset
        self._checkpoint = checkpoint
        self._local = local
        self._epochs = epochs
        self._producers = producers

    def reset_at(self, offset: int) -> None:
        """Empties the log (Kafka's truncateFullyAndStartAt): every segment is replaced by an
        empty one at `offset`, the new log start; epochs and producer snapshots are forgotten.
        The caller then moves the log end there. Hold `LocalLog.exclusive()`; raises OSError."""
        self._local.reset_at(offset)
        self._producers.delete_all_snapshots()
        self._epochs.clear()
        self.offset = offset
        self._checkpoint.stage(offset)

    def delete_old_segments(
        self, config: LogConfig, *, high_watermark: int, log_end_offset: int, now_ms: int
    ) -> int:
        """The retention pass of `PartitionLog.delete_old_segments`; returns the segments
        deleted."""
        count = self._deletable_prefix(config, high_watermark, now_ms)
        if count:
            self._delete_prefix(count, log_end_offset)
        return count

    def delete_records_before(
        self, offset: int, config: LogConfig, *, high_watermark: int, log_end_offset: int
    ) -> None:
        """`PartitionLog.delete_records_before`: LogError(OFFSET_OUT_OF_RANGE) above
        `high_watermark`, nothing to do at or below the log start."""
        if offset > high_watermark:
            raise LogError(
                common_pb2.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is above the high watermark {high_watermark}",
            )
        if offset <= self.offset:
            return
        with self._local.failing_on_error("delete records"):
            self._checkpoint.write(offset)
            self.offset = offset
            self._epochs.truncate_from_start(offset)
        count = self._deletable_prefix(config, high_watermark, None)
        if count:
            self._delete_prefix(count, log_end_offset)
        else:
            with self._local.failing_on_error("delete producer snapshots"):
                self._producers.delete_obsolete(self._local.view, self.offset)

    def _deletable_prefix(self, config: LogConfig, high_watermark: int, now_ms: int | None) -> int:
        """See retention.deletable_prefix (only by log start offset when `now_ms` is None)."""
        return deletable_prefix(
            self._local.view.segments,
            config=config,
            log_start_offset=self.offset,
            high_watermark=high_watermark,
            now_ms=now_ms,
        )

    def _delete_prefix(self, count: int, log_end_offset: int) -> None:
        """Deletes the `count` oldest segments; the log start moves up to the first kept one."""
        log_start_offset = max(self.offset, self._local.view.bases[count])
        assert log_start_offset <= log_end_offset, (log_start_offset, log_end_offset)
        with self._local.exclusive(), self._local.failing_on_error("delete segments"):
            self.offset = log_start_offset
            self._local.delete_oldest(count)
        with self._local.failing_on_error("store the log start offset"):
            self._checkpoint.stage(log_start_offset)
            self._epochs.truncate_from_start(log_start_offset)
            self._producers.delete_obsolete(self._local.view, log_start_offset)
