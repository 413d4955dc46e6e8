"""A partition replica's log: a directory of segments, as in Kafka (UnifiedLog + LocalLog).

Layout of `<topic>-<partition>/`: segments (`<20-digit base offset>.log`, `.index`,
`.timeindex`), producer state snapshots (`<20-digit offset>.snapshot`, see
`producer_snapshots`), `leader-epoch-checkpoint`, and, one per partition directory rather than
Kafka's one per log directory (see `checkpoints`), `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint` and `replication-offset-checkpoint` (the high watermark). The
`.kafka_cleanshutdown` marker exists only between `close()` and the next `open()`.

What callers may rely on:
- Appends are all-or-nothing: every batch of the request is checked before anything is
  written, and a failed write is cut back off (file and indexes) before the error is raised.
- The leader assigns offsets and stamps its epoch whatever the producer put there; a follower
  keeps the leader's offsets and learns epochs from the batches.
- Reads return whole batches exactly as stored, never decoded.
- Idempotent producers (module `producer_state`): the leader refuses batches out of sequence or
  of a fenced epoch, and answers a batch it already holds with the original offsets, writing
  nothing (`AppendInfo.duplicate`). The producer state follows every change of the log:
  appends, truncation, restarts and segment deletion (module `partition_producers`).
- Offsets never move back except by `truncate_to`/`truncate_fully_and_start_at`: the log start
  offset and the high watermark only grow otherwise; the high watermark never passes the end.
- Durability: by default no fsync (Kafka relies on replication); fsync every flush.messages
  messages or flush.ms, on roll (the finished segment), and on `flush()`/`close()`. The
  recovery point is the offset below which everything is fsynced; a crash costs at most the
  batches above it, cut at the first torn one on the next `open()`.
- I/O errors raise LogError(KAFKA_STORAGE_ERROR). If the log cannot put its files back in a
  consistent state, it goes offline: every later mutation raises the same error until the broker
  reopens the directory (which recovers it).

Threads: one lock serialises mutations; reads (`read`, `offset_for_timestamp`, `segments`)
take only the segments' shared lock (module `local_log`), so they run alongside appends and see
every batch of an append or none of it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from pykraft.broker.log.checkpoints import EpochEntry, TopicPartition
from pykraft.broker.log.config import LogConfig
from pykraft.broker.log.errors import LogError, storage_error
from pykraft.broker.log.files import FileRange
from pykraft.broker.log.local_log import LocalLog
from pykraft.broker.log.log_start import LogStart
from pykraft.broker.log.partition_producers import PartitionProducers
from pykraft.broker.log.producer_state import ProducerEntry
from pykraft.broker.log.recovery import CLEAN_SHUTDOWN_FILE, load_log
from pykraft.broker.log.results import (
    AppendInfo,
    RangeRead,
    Read,
    ReadResult,
    append_info,
    duplicate_info,
    nothing_appended,
)
from pykraft.broker.log.segment import LogSegment, SegmentInfo
from pykraft.broker.log.segment_swap import check_cleaned_offsets, locate, open_cleaned
from pykraft.broker.log.segment_view import Span, find_offset_by_timestamp, find_span
from pykraft.broker.log.validation import (
    Batches,
    assign_offsets,
    check_follower_batches,
    check_leader_batches,
    split_batches,
)
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import TimestampType
from pykraft.server_common.durable_files import fsync_directory


class PartitionLog:
    """One partition replica's log on disk. Create with `PartitionLog.open`."""

    def __init__(self, directory: Path, config: LogConfig, *, now_ms: int) -> None:
        """Use `open`; this loads (or creates) `directory` and recovers it after a crash."""
        loaded = load_log(directory, config)
        self.directory = directory
        self.topic_partition: TopicPartition = loaded.files.topic_partition
        self._config = config
        self._files = loaded.files
        self._epochs = loaded.epochs
        self._local = LocalLog(directory, config, loaded.segments)
        self._log_end_offset = loaded.segments[-1].next_offset
        self._recovery_point = loaded.recovery_point
        self._high_watermark = loaded.high_watermark
        self.had_clean_shutdown = loaded.had_clean_shutdown
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self._lock = threading.RLock()
        try:
            # Nothing else changes the segments while the constructor runs.
            self._producers = PartitionProducers(
                directory,
                self._local.view,
                log_start_offset=loaded.log_start_offset,
                log_end_offset=self._log_end_offset,
            )
        except BaseException:
            for segment in loaded.segments:
                segment.close_files()
            raise
        self._start = LogStart(
            loaded.log_start_offset,
            checkpoint=self._files.log_start_offset,
            local=self._local,
            epochs=self._epochs,
            producers=self._producers,
        )

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, now_ms: int) -> PartitionLog:
        """Opens the partition directory `directory` (named `<topic>-<partition>`), creating
        it if needed and recovering it if the last run did not close it. Raises
        LogError(KAFKA_STORAGE_ERROR) on I/O failure."""
        try:
            return cls(directory, config, now_ms=now_ms)
        except OSError as error:
            raise storage_error(f"{directory}: {error}") from error

    # --- state ---

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_start_offset(self) -> int:
        return self._start.offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        """Offsets below this are fsynced."""
        return self._recovery_point

    @property
    def latest_epoch(self) -> int:
        """The leader epoch of the last epoch-cache entry, -1 if none."""
        return self._epochs.latest_epoch

    def epoch_entries(self) -> tuple[EpochEntry, ...]:
        with self._lock:
            return self._epochs.entries()

    def producers(self) -> tuple[ProducerEntry, ...]:
        """The idempotent producers the log knows, the one that wrote least recently first."""
        with self._lock:
            return self._producers.state.entries()

    def producer_snapshot_offsets(self) -> list[int]:
        """The offsets of the producer state snapshots on disk, in increasing order."""
        with self._lock:
            return self._producers.snapshot_offsets()

    def update_config(self, config: LogConfig) -> None:
        """Applies changed topic configs to later appends, rolls and retention passes."""
        with self._lock:
            self._config = config
            self._local.configure(config)

    # --- appending ---

    def append_as_leader(self, batches: bytes, *, leader_epoch: int, now_ms: int) -> AppendInfo:
        """Validates and appends a produce request's batches, giving them the next offsets and
        `leader_epoch`. Raises LogError (module validation's codes; FENCED_LEADER_EPOCH if
        `leader_epoch` is below the latest epoch the log has seen; module producer_state's for
        idempotent batches) with nothing written. A request whose batches were all written
        before returns the original offsets with `duplicate` set, writing nothing."""
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
            data = bytearray(batches)
            assigned = assign_offsets(
                data,
                parsed,
                base_offset=self._log_end_offset,
                leader_epoch=leader_epoch,
                config=config,
                now_ms=now_ms,
            )
            self._append(data, assigned, now_ms=now_ms)
            assert self._epochs.latest_epoch == leader_epoch, (
                self._epochs.latest_epoch,
                leader_epoch,
            )
        stamped = config.message_timestamp_type is TimestampType.LOG_APPEND_TIME
        return append_info(data, assigned, now_ms if stamped else -1)

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
            self._append(batches, parsed, now_ms=None)
        return append_info(batches, parsed, -1)

    def _append(self, data: bytes | bytearray, batches: Batches, *, now_ms: int | None) -> None:
        """Rolls if due, writes, learns epochs, publishes the new end, flushes if due. Holds
        the lock. On OSError puts everything back (or goes offline) and raises."""
        last = batches[-1][1]
        assert batches[0][1].base_offset >= self._log_end_offset, (
            batches[0][1],
            self._log_end_offset,
        )
        max_timestamp = max(header.max_timestamp for _, header in batches)
        active = self._local.active
        if active.should_roll(
            size_bytes=len(data), max_timestamp=max_timestamp, last_offset=last.last_offset
        ):
            active = self._roll(batches[0][1].base_offset)
        mark = active.mark()
        epochs_before = self._epochs.entries()
        try:
            active.append(data, batches)
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

    def _assert_offsets(self) -> None:
        """The offsets' order, checked after every change: log start <= log end, high
        watermark <= log end, recovery point <= log end."""
        end = self._log_end_offset
        assert 0 <= self._start.offset <= end, (self._start.offset, end)
        assert 0 <= self._high_watermark <= end, (self._high_watermark, end)
        assert 0 <= self._recovery_point <= end, (self._recovery_point, end)

    @property
    def failure(self) -> str | None:
        """Why this log went offline after a storage error it could not undo, else None."""
        return self._local.failure

    # --- rolling and flushing ---

    def roll(self, *, now_ms: int) -> None:
        """Starts a new active segment at the log end offset unless the active one is empty.
        `now_ms` is accepted for the broker's scheduler; rolling itself needs no clock."""
        del now_ms
        with self._lock:
            self._local.check_writable()
            if self._local.active.size:
                self._roll(self._log_end_offset)

    def _roll(self, base_offset: int) -> LogSegment:
        """Finishes the active segment (last time index entry, fsync), snapshots the producer
        state at `base_offset` (no batch lies between the log end and it) and publishes a new
        segment there. Holds the lock."""
        old = self._local.active
        try:
            old.on_become_inactive()  # an entry that stays valid if the roll fails below
            old.flush()
            self._producers.write_snapshot(base_offset)
        except OSError as error:
            raise storage_error(f"roll of {self.directory} at {base_offset}: {error}") from error
        new = self._local.roll(base_offset)
        self._recovery_point = max(self._recovery_point, old.next_offset)
        return new

    def flush(self) -> None:
        """fsyncs everything appended, then advances the recovery point to the log end offset
        and stores it and the high watermark in their checkpoint files."""
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

    def _flush(self) -> None:
        with self._local.failing_on_error(f"flush of {self.directory}"):
            self._local.flush(self._recovery_point)
            self._files.recovery_point.write(self._log_end_offset)
            self._files.high_watermark.write(self._high_watermark)
        self._recovery_point = self._log_end_offset
        self._unflushed_messages = 0

    # --- reading ---

    def read(self, offset: int, *, bytes_max: int, upper_offset: int | None = None) -> ReadResult:
        """Whole batches from the one holding `offset`: at least one batch if there is any
        below the bound, then more while they fit `bytes_max`, from one segment (as Kafka).
        No batch whose last offset is >= `upper_offset` (default: the log end; consumers pass
        the high watermark). LogError(OFFSET_OUT_OF_RANGE) below the log start offset or above
        the log end offset."""
        found = self._read(offset, bytes_max, upper_offset, _read_bytes)
        return ReadResult(
            found.data or b"",
            found.first_offset,
            found.next_offset,
            found.high_watermark,
            found.log_start_offset,
        )

    def read_range(
        self, offset: int, *, bytes_max: int, upper_offset: int | None = None
    ) -> RangeRead:
        """The batches `read` returns, as a range of their segment's file on a duplicated
        descriptor (FileRange says why) instead of bytes: no record byte is read. Out of
        descriptors (EMFILE, ENFILE), the bytes instead: a fetch must not fail for that. The
        caller closes the range; same errors as `read`."""
        return self._read(offset, bytes_max, upper_offset, _open_range)

    def _read(
        self,
        offset: int,
        bytes_max: int,
        upper_offset: int | None,
        take: Callable[[Span], _Taken],
    ) -> Read[_Taken]:
        """`take` of the span a read finds, under the shared lock (the segment stays open)."""
        assert bytes_max >= 0, bytes_max
        with self._local.reading():
            log_end_offset = self._log_end_offset  # before the view: see _append's publishing
            view = self._local.view
            log_start_offset, high_watermark = self._start.offset, self._high_watermark
            if not log_start_offset <= offset <= log_end_offset:
                raise LogError(
                    common_pb2.OFFSET_OUT_OF_RANGE,
                    f"offset {offset} is outside [{log_start_offset}, {log_end_offset}]",
                )
            upper = log_end_offset if upper_offset is None else min(upper_offset, log_end_offset)
            span = find_span(view, offset, bytes_max, upper) if offset < upper else None
            if span is None:
                return Read(None, offset, offset, high_watermark, log_start_offset)
            taken = take(span)
        return Read(taken, span.first_offset, span.next_offset, high_watermark, log_start_offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record at or after the log start whose timestamp
        is >= `timestamp_ms`, or None (Kafka's ListOffsets by time; the broker hides answers at
        or above the high watermark from consumers)."""
        with self._local.reading():
            return find_offset_by_timestamp(self._local.view, timestamp_ms, self._start.offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch: (largest epoch <= `epoch`, its end offset), or
        (-1, -1) when the log knows no such epoch (see LeaderEpochCache.end_offset_for)."""
        with self._lock:
            return self._epochs.end_offset_for(epoch, self._log_end_offset)

    def segments(self) -> tuple[SegmentInfo, ...]:
        """A snapshot of the segments, oldest first; the last one is the active segment."""
        return self._local.infos()

    # --- offsets that move ---

    def update_high_watermark(self, offset: int) -> None:
        """Raises the high watermark to `offset`; a lower value is ignored (it never moves
        back, except when truncation cuts the log below it)."""
        with self._lock:
            assert 0 <= offset <= self._log_end_offset, (offset, self._log_end_offset)
            self._high_watermark = max(self._high_watermark, offset)
            self._assert_offsets()

    def truncate_to(self, offset: int) -> None:
        """Drops every batch that holds an offset >= `offset` (a follower that diverged). A
        batch goes whole, so the log may end below `offset` if it fell inside one (but not
        below the log start offset: if that batch holds the log start too, the log is left
        empty at the log start). Below the log start offset the log is emptied and starts at
        `offset`, as in Kafka."""
        assert offset >= 0, offset
        with self._lock:
            self._local.check_writable()
            if offset >= self._log_end_offset:
                return
            if offset < self._start.offset:
                self._truncate_fully(offset)
                return
            with self._local.exclusive(), self._local.failing_on_error("truncate"):
                log_end_offset = self._local.truncate_segments(offset)
                if log_end_offset < self._start.offset:
                    # The batch holding `offset` held the log start too: nothing is left.
                    self._reset_at(self._start.offset)
                else:
                    self._moved_end(log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Deletes every segment and starts an empty log at `offset` (a follower whose log end
        is below the leader's log start offset)."""
        assert offset >= 0, offset
        with self._lock:
            self._local.check_writable()
            self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        with self._local.exclusive(), self._local.failing_on_error("truncate fully"):
            self._reset_at(offset)

    def _reset_at(self, offset: int) -> None:
        """Replaces every segment by an empty one at `offset`, the new log start and end."""
        self._start.reset_at(offset)
        self._moved_end(offset)

    def _moved_end(self, log_end_offset: int) -> None:
        """After a truncation: offsets at or above the new end are forgotten everywhere, and
        stored offsets above it are lowered at once, so a crash cannot bring them back."""
        assert self._start.offset <= log_end_offset, (self._start.offset, log_end_offset)
        self._log_end_offset = log_end_offset
        self._epochs.truncate_from_end(log_end_offset)
        if self._high_watermark > log_end_offset:
            self._high_watermark = log_end_offset
            self._files.high_watermark.write(log_end_offset)
        if self._recovery_point > log_end_offset:
            self._recovery_point = log_end_offset
            self._files.recovery_point.write(log_end_offset)
        self._producers.reload(self._local.view, log_end_offset)
        self._assert_offsets()

    # --- retention ---

    def delete_old_segments(self, *, now_ms: int) -> int:
        """Kafka's retention pass: deletes the oldest segments while one of them is wholly below
        the log start offset, or (cleanup.policy delete) older than retention.ms by its largest
        timestamp, or needed to bring the log within retention.bytes. Never the active segment
        and never data at or above the high watermark. Returns the segments deleted."""
        with self._lock:
            self._local.check_writable()
            return self._start.delete_old_segments(
                self._config,
                high_watermark=self._high_watermark,
                log_end_offset=self._log_end_offset,
                now_ms=now_ms,
            )

    def delete_records_before(self, offset: int) -> None:
        """Kafka's DeleteRecords: the log start offset becomes `offset` (reads below it fail)
        and segments wholly below it are deleted. LogError(OFFSET_OUT_OF_RANGE) above the
        high watermark."""
        with self._lock:
            self._local.check_writable()
            self._start.delete_records_before(
                offset,
                self._config,
                high_watermark=self._high_watermark,
                log_end_offset=self._log_end_offset,
            )

    # --- the cleaner's swap ---

    def replace_segments(self, old: Sequence[SegmentInfo], new_paths: Sequence[Path]) -> None:
        """Swaps cleaned segments in for `old` (consecutive, from `segments()`, not the active
        one), atomically across crashes with Kafka's protocol: verify the new files, rename
        them `.cleaned` -> `.swap` (the commit point), the old files -> `.deleted`, the new ones
        to their plain names, then delete the old files. `new_paths` are files named
        `<20-digit base offset>.log.cleaned` in the log directory, holding whole batches; the
        first starts at old[0]'s base offset, offsets increase and stay below the segment after
        `old`. Indexes are built here. ValueError if `old` is not the current state or the new
        files break those rules, LogError(CORRUPT_MESSAGE) if a new file holds a bad batch; the
        new files are removed then. Verifying takes no lock: appends go on meanwhile."""
        if not old:
            raise ValueError("no segments to replace")
        cleaned = open_cleaned(self.directory, self._config, new_paths)
        committed = False  # once set, the swap completes or the log goes offline
        try:
            with self._lock:
                self._local.check_writable()
                view = self._local.view
                start = locate(view, old)
                end_offset = view.bases[start + len(old)]
                check_cleaned_offsets(cleaned, old[0].base_offset, end_offset)
                committed = True
                with self._local.exclusive(), self._local.failing_on_error("swap segments"):
                    self._local.swap(start, len(old), cleaned)
        except BaseException:
            if not committed:
                for segment in cleaned:
                    segment.delete()
            raise

    # --- closing ---

    def close(self) -> None:
        """Flushes, checkpoints and writes the clean-shutdown marker (unless the log is
        offline, so the next open recovers it), then closes every file. Idempotent."""
        with self._lock:
            if self._local.closed:
                return
            try:
                if self._local.failure is None:
                    with self._local.failing_on_error(f"close of {self.directory}"):
                        self._local.active.on_become_inactive()
                    self._flush()
                    with self._local.failing_on_error(f"close of {self.directory}"):
                        self._producers.write_snapshot(self._log_end_offset)
                        (self.directory / CLEAN_SHUTDOWN_FILE).touch()
                        fsync_directory(self.directory)
            finally:
                self._local.close()


_Taken = TypeVar("_Taken")


def _read_bytes(span: Span) -> bytes:
    return span.segment.read_bytes(span.position, span.length)


def _open_range(span: Span) -> FileRange | bytes:
    return span.segment.open_range(span.position, span.length)
