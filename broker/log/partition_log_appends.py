"""The write path of a `PartitionLog` (mixed into it): leader and follower appends, rolling to a
new segment and flushing, all under the log's lock (see `partition_log` for what callers may
rely on: all-or-nothing appends, offsets and epochs, idempotent producers, durability)."""

from __future__ import annotations

from pykraft.broker.log.errors import LogError, storage_error
from pykraft.broker.log.partition_log_base import PartitionLogBase
from pykraft.broker.log.results import AppendInfo, append_info, duplicate_info, nothing_appended
from pykraft.broker.log.segment import LogSegment
from pykraft.broker.log.validation import (
    Batches,
    assign_offsets,
    check_follower_batches,
    check_leader_batches,
    split_batches,
)
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import Buffer, TimestampType


class PartitionLogAppends(PartitionLogBase):
    """Appending, rolling and flushing of `PartitionLog`."""

    def append_as_leader(self, batches: bytes, *, leader_epoch: int, now_ms: int) -> AppendInfo:
        """Validates and appends a produce request's batches, giving them the next offsets and
        `leader_epoch`. Raises LogError (module validation's codes; FENCED_LEADER_EPOCH if
        `leader_epoch` is below the latest epoch the log has seen; module producer_state's for
        idempotent batches) with nothing written. A request whose batches were all written
        before returns the original offsets with `duplicate` set, writing nothing. `batches`
        is left as it is and its records are written from it: the caller must not change it
        during the call."""
        assert leader_epoch >= 0, leader_epoch
        config = self._config
        parsed = split_batches(batches)
        check_leader_batches(batches, parsed, config, now_ms=now_ms)
        with self._lock:
            self._local.check_writable()
            if leader_epoch < self._epochs.latest_epoch:
                raise LogError(
                    common_pb2.FENCED_LEADER_EPOCH,
                    f"epoch {leader_epoch} is older than {self._epochs.latest_epoch}",
                )
            if not parsed:
                return nothing_appended(self._log_end_offset)
            duplicate = self._producers.state.check_leader_append(
                [h for _, h in parsed], base_offset=self._log_end_offset
            )
            if duplicate is not None:
                return duplicate_info(duplicate, config)
            stamped = assign_offsets(
                batches,
                parsed,
                base_offset=self._log_end_offset,
                leader_epoch=leader_epoch,
                config=config,
                now_ms=now_ms,
            )
            self._append(stamped.pieces, stamped.batches, now_ms=now_ms)
            assert self._epochs.latest_epoch == leader_epoch, (
                self._epochs.latest_epoch,
                leader_epoch,
            )
        append_time = config.message_timestamp_type is TimestampType.LOG_APPEND_TIME
        return append_info(stamped.size_bytes, stamped.batches, now_ms if append_time else -1)

    def append_as_follower(self, batches: bytes) -> AppendInfo:
        """Appends batches fetched from the leader with their offsets and epochs. The first
        must start at or after the log end offset (after it only where the leader's cleaner
        removed batches); LogError(UNKNOWN_SERVER_ERROR) otherwise, CORRUPT_MESSAGE for
        damaged batches, nothing written in either case."""
        parsed = split_batches(batches)
        with self._lock:
            self._local.check_writable()
            if not parsed:
                return nothing_appended(self._log_end_offset)
            check_follower_batches(parsed, log_end_offset=self._log_end_offset)
            self._append([batches], parsed, now_ms=None)
        return append_info(len(batches), parsed, -1)

    def _append(self, pieces: list[Buffer], batches: Batches, *, now_ms: int | None) -> None:
        """Rolls if due, writes `batches` (their bytes are `pieces`, see LogSegment.append),
        learns epochs, publishes the new end, flushes if due. Holds the lock. On OSError puts
        everything back (or goes offline) and raises."""
        last = batches[-1][1]
        assert batches[0][1].base_offset >= self._log_end_offset, (
            batches[0][1],
            self._log_end_offset,
        )
        max_timestamp = max(header.max_timestamp for _, header in batches)
        active = self._local.active
        if active.should_roll(
            size_bytes=batches[-1][0] + last.size_bytes,
            max_timestamp=max_timestamp,
            last_offset=last.last_offset,
        ):
            active = self._roll(batches[0][1].base_offset)
        mark = active.mark()
        epochs_before = self._epochs.entries()
        try:
            active.append(pieces, batches)
            for _, header in batches:
                self._epochs.assign(header.partition_leader_epoch, header.base_offset)
        except OSError as error:

            def undo() -> None:
                active.rollback(mark)
                self._epochs.restore(epochs_before)

            self._local.undo(f"append to {active.log_path}", error, undo)
        self._producers.state.apply([header for _, header in batches])
        assert active.next_offset > self._log_end_offset, "the log end never moves back on append"
        self._log_end_offset = active.next_offset
        self._assert_offsets()
        self._unflushed_messages += sum(header.record_count for _, header in batches)
        self._maybe_flush(now_ms)

    def roll(self, *, now_ms: int) -> None:
        """Starts a new active segment at the log end offset unless the active one is empty.
        `now_ms` is accepted for the broker's scheduler; rolling itself needs no clock."""
        del now_ms
        with self._lock:
            self._local.check_writable()
            if self._local.active.size:
                self._roll(self._log_end_offset)

    def _roll(self, base_offset: int) -> LogSegment:
        """Finishes the active segment (last time index entry), fsyncs it and every segment
        above the recovery point (after a crash, recovered ones may lie there: Kafka's
        flushUptoOffsetExclusive), snapshots the producer state at `base_offset` (no batch lies
        between the log end and it) and publishes a new segment there. Holds the lock."""
        old = self._local.active
        try:
            old.on_become_inactive()  # an entry that stays valid if the roll fails below
            self._local.flush(self._recovery_point)
            self._producers.write_snapshot(base_offset)
        except OSError as error:
            raise storage_error(f"roll of {self.directory} at {base_offset}: {error}") from error
        new = self._local.roll(base_offset)
        self._recovery_point = max(self._recovery_point, old.next_offset)
        return new

    def flush(self) -> None:
        """fsyncs everything appended, then advances the recovery point to the log end offset;
        it and the high watermark reach their checkpoint files with the directory's next write
        (`dir_checkpoints`)."""
        with self._lock:
            self._local.check_writable()
            self._flush()

    def maybe_flush(self, *, now_ms: int) -> None:
        """Flushes if flush.ms has passed since the last flush with messages unflushed (the
        broker's periodic task; appends check flush.messages themselves)."""
        with self._lock:
            self._local.check_writable()
            self._maybe_flush(now_ms)

    def _maybe_flush(self, now_ms: int | None) -> None:
        config = self._config
        due_by_count = self._unflushed_messages >= config.flush_messages
        due_by_time = now_ms is not None and now_ms - self._last_flush_ms >= config.flush_ms
        if self._unflushed_messages and (due_by_count or due_by_time):
            self._flush()
            if now_ms is not None:
                self._last_flush_ms = now_ms

    def _flush(self, *, fsync: bool = True) -> None:
        with self._local.failing_on_error(f"flush of {self.directory}"):
            self._local.flush(self._recovery_point, fsync=fsync)
        self._recovery_point = self._log_end_offset
        self._unflushed_messages = 0
        self._stage_offsets()
