"""A partition replica's log: a directory of segments, as in Kafka (UnifiedLog + LocalLog).

Layout of `<topic>-<partition>/`: segments (`<20-digit base offset>.log`, `.index`,
`.timeindex`), producer state snapshots (`<20-digit offset>.snapshot`, see
`producer_snapshots`) and `leader-epoch-checkpoint`. Its recovery point, log start offset and
high watermark are entries of its log directory's checkpoint files, and a clean shutdown is its
log directory's `.kafka_cleanshutdown` marker (`dir_checkpoints`).

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
every batch of an append or none of it. Every part of the log (`partition_log_base` lists them)
keeps to this.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from pykraft.broker.log.checkpoints import EpochEntry, TopicPartition
from pykraft.broker.log.config import LogConfig
from pykraft.broker.log.dir_checkpoints import LogDirCheckpoints
from pykraft.broker.log.errors import storage_error
from pykraft.broker.log.local_log import LocalLog
from pykraft.broker.log.log_start import LogStart
from pykraft.broker.log.partition_log_appends import PartitionLogAppends
from pykraft.broker.log.partition_log_reads import PartitionLogReads
from pykraft.broker.log.partition_log_truncation import PartitionLogTruncation
from pykraft.broker.log.partition_producers import PartitionProducers
from pykraft.broker.log.producer_state import ProducerEntry
from pykraft.broker.log.recovery import load_log
from pykraft.broker.log.segment import SegmentInfo
from pykraft.broker.log.segment_swap import check_cleaned_offsets, locate, open_cleaned


class PartitionLog(PartitionLogAppends, PartitionLogReads, PartitionLogTruncation):
    """One partition replica's log on disk. Create with `PartitionLog.open`. Its appends,
    rolls and flushes are `PartitionLogAppends`', its reads `PartitionLogReads`', its high
    watermark and truncation `PartitionLogTruncation`'s (one module each); opening, state,
    retention, the cleaner's swap and closing are here."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        now_ms: int,
        checkpoints: LogDirCheckpoints | None = None,
    ) -> None:
        """Use `open`; this loads (or creates) `directory` and recovers it after a crash."""
        self._own_checkpoints = checkpoints is None
        if checkpoints is None:
            checkpoints = LogDirCheckpoints(directory)
        self._checkpoints = checkpoints
        loaded = load_log(directory, config, checkpoints)
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
                lambda: self._local.view,
                log_start_offset=loaded.log_start_offset,
                log_end_offset=self._log_end_offset,
                names=loaded.names,
                clean=loaded.had_clean_shutdown,
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
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        now_ms: int,
        checkpoints: LogDirCheckpoints | None = None,
    ) -> PartitionLog:
        """Opens the partition directory `directory` (named `<topic>-<partition>`), creating
        it if needed and recovering it if the last run did not close it. Raises
        LogError(KAFKA_STORAGE_ERROR) on I/O failure.

        `checkpoints` are the offset checkpoint files and clean-shutdown marker of
        `directory.parent`, shared by every log there; whoever passes them writes them
        (`LogDirCheckpoints.write_all` after `stage_checkpoints` of each log, and the marker
        once every log there is closed: the broker does, periodically and at shutdown).
        Without them the log keeps a set of its own in `directory` itself (the layout from
        before there was one per log directory) and writes it at `close`: for a log on its
        own (tests, benches)."""
        try:
            return cls(directory, config, now_ms=now_ms, checkpoints=checkpoints)
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

    def stage_checkpoints(self) -> None:
        """Hands the current recovery point and high watermark to the directory's checkpoint
        files, for their next write (the broker's periodic checkpoint, as Kafka's)."""
        with self._lock:
            self._stage_offsets()

    @property
    def failure(self) -> str | None:
        """Why this log went offline after a storage error it could not undo, else None."""
        return self._local.failure

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

    def close(self, *, fsync: bool = True) -> None:
        """Flushes and hands its offsets to the directory's checkpoints (unless the log is
        offline, so the next open recovers it), then closes every file. A log that owns its
        checkpoints (see `open`) also writes them and the directory's clean-shutdown marker;
        otherwise their owner does, once every log there is closed. Idempotent. Without
        `fsync` nothing is fsynced: the owner of the checkpoints must make the directory's
        filesystem durable (`sync_filesystem`) before it writes them, since the recovery point
        handed over is the log end."""
        assert fsync or not self._own_checkpoints, self.directory
        with self._lock:
            if self._local.closed:
                return
            try:
                if self._local.failure is None:
                    with self._local.failing_on_error(f"close of {self.directory}"):
                        self._local.active.on_become_inactive()
                    self._flush(fsync=fsync)
                    with self._local.failing_on_error(f"close of {self.directory}"):
                        self._producers.close_snapshot(self._log_end_offset, fsync=fsync)
                        if self._own_checkpoints:
                            self._checkpoints.write_all()
                            self._checkpoints.mark_clean_shutdown()
            finally:
                self._local.close()
