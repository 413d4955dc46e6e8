"""The offsets of a `PartitionLog` that move (mixed into it): the high watermark, which only
grows, and truncation, the one way the log end, the high watermark and the recovery point move
back (a follower whose log diverged from its leader's), under the log's lock and the segments'
exclusive lock."""

from __future__ import annotations

from pykraft.broker.log.dir_checkpoints import DeferredWrites
from pykraft.broker.log.partition_log_base import PartitionLogBase


class PartitionLogTruncation(PartitionLogBase):
    """The high watermark and truncation of `PartitionLog`."""

    def update_high_watermark(self, offset: int) -> bool:
        """Raises the high watermark to `offset`; a lower value is ignored (it never moves
        back, except when truncation cuts the log below it). Says whether it moved."""
        with self._lock:
            assert 0 <= offset <= self._log_end_offset, (offset, self._log_end_offset)
            if offset <= self._high_watermark:
                return False
            self._high_watermark = offset
            self._assert_offsets()
            return True

    def truncate_to(self, offset: int, deferred: DeferredWrites | None = None) -> None:
        """Drops every batch that holds an offset >= `offset` (a follower that diverged). A
        batch goes whole, so the log may end below `offset` if it fell inside one (but not
        below the log start offset: if that batch holds the log start too, the log is left
        empty at the log start). Below the log start offset the log is emptied and starts at
        `offset`, as in Kafka. The lowered offsets are stored before it returns, or, given
        `deferred`, by its owner (see DeferredWrites)."""
        assert offset >= 0, offset
        with self._lock:
            self._local.check_writable()
            if offset >= self._log_end_offset:
                return
            if offset < self._start.offset:
                self._truncate_fully(offset, deferred)
                return
            with self._local.exclusive(), self._local.failing_on_error("truncate"):
                log_end_offset = self._local.truncate_segments(offset)
                if log_end_offset < self._start.offset:
                    # The batch holding `offset` held the log start too: nothing is left.
                    self._reset_at(self._start.offset, deferred)
                else:
                    self._moved_end(log_end_offset, deferred)

    def truncate_fully_and_start_at(
        self, offset: int, deferred: DeferredWrites | None = None
    ) -> None:
        """Deletes every segment and starts an empty log at `offset` (a follower whose log end
        is below the leader's log start offset); `deferred` as for `truncate_to`."""
        assert offset >= 0, offset
        with self._lock:
            self._local.check_writable()
            self._truncate_fully(offset, deferred)

    def _truncate_fully(self, offset: int, deferred: DeferredWrites | None) -> None:
        with self._local.exclusive(), self._local.failing_on_error("truncate fully"):
            self._reset_at(offset, deferred)

    def _reset_at(self, offset: int, deferred: DeferredWrites | None) -> None:
        """Replaces every segment by an empty one at `offset`, the new log start and end."""
        self._start.reset_at(offset)
        self._moved_end(offset, deferred)

    def _moved_end(self, log_end_offset: int, deferred: DeferredWrites | None) -> None:
        """After a truncation: offsets at or above the new end are forgotten everywhere, and
        stored offsets above it are lowered (stored at once, or by the owner of `deferred`),
        so a crash cannot bring them back."""
        assert self._start.offset <= log_end_offset, (self._start.offset, log_end_offset)
        self._log_end_offset = log_end_offset
        self._epochs.truncate_from_end(log_end_offset)
        lowered = self._recovery_point > log_end_offset or self._high_watermark > log_end_offset
        self._high_watermark = min(self._high_watermark, log_end_offset)
        self._recovery_point = min(self._recovery_point, log_end_offset)
        if lowered:  # as Kafka's truncateTo: the directory's files are written now
            self._files.high_watermark.stage(self._high_watermark)
            self._files.recovery_point.write(self._recovery_point, deferred)
        self._producers.reload(self._local.view, log_end_offset)
        self._assert_offsets()
