"""Opening a partition directory: finishing interrupted operations and recovering from a crash.

What `load_log` does, in order:
1. Notes whether the previous run shut down cleanly: the log directory's `.kafka_cleanshutdown`
   marker (`dir_checkpoints`, written once every log there was closed), or the partition's own
   from the layout before, which is removed only at the very end.
2. Removes leftovers: checkpoint temp files (`*.tmp`), cleaner output that never committed
   (`*.cleaned`), segments already replaced (`*.deleted`), and index files without a log file.
3. Completes a segment swap that committed (`*.log.swap` exists, Kafka's protocol): the old
   segments whose base offsets fall in the swapped range go, and the swap files take their names.
4. Loads the segments. Unclean shutdown: every segment that may hold offsets at or above the
   recovery point is verified batch by batch (`LogSegment.recover`); at the first torn or
   corrupt batch the file is cut and all later segments are deleted, so exactly the batches
   before the first bad byte remain. They stay above the recovery point, unflushed, as Kafka
   leaves them: a second crash recovers them again. Segments below the recovery point (or all
   of them after a clean shutdown) are trusted; one whose index is missing or inconsistent is
   rebuilt.
5. Reconciles the checkpoints with what survived: log start offset = max(checkpoint, first
   base offset); high watermark and recovery point no higher than the log end offset; the
   leader-epoch cache forgets entries past the end (and learns the epochs of recovered batches).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pykraft.broker.log.checkpoints import (
    HIGH_WATERMARK_FILE,
    LEADER_EPOCH_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    LeaderEpochCheckpointFile,
    TopicPartition,
)
from pykraft.broker.log.config import LogConfig
from pykraft.broker.log.dir_checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    CheckpointSlot,
    LogDirCheckpoints,
)
from pykraft.broker.log.index import IndexCorruptError
from pykraft.broker.log.leader_epochs import LeaderEpochCache
from pykraft.broker.log.segment import LogSegment
from pykraft.broker.log.segment_names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    base_offset_of,
    file_name,
)
from pykraft.proto.record_batch import BatchHeader, CorruptBatchError
from pykraft.server_common.durable_files import (
    fsync_directory,
    make_directory_durably,
    unlink_durably,
)

log = logging.getLogger(__name__)

CLEANED_SUFFIX: Final = ".cleaned"
SWAP_SUFFIX: Final = ".swap"
DELETED_SUFFIX: Final = ".deleted"
_TEMP_SUFFIX: Final = ".tmp"


@dataclass(frozen=True)
class PartitionFiles:
    """A partition's checkpoints: its entries in its log directory's offset checkpoint files
    (`dir_checkpoints`) and its own leader-epoch checkpoint."""

    topic_partition: TopicPartition
    recovery_point: CheckpointSlot
    log_start_offset: CheckpointSlot
    high_watermark: CheckpointSlot
    leader_epochs: LeaderEpochCheckpointFile

    @staticmethod
    def of(
        directory: Path, topic_partition: TopicPartition, checkpoints: LogDirCheckpoints
    ) -> PartitionFiles:
        return PartitionFiles(
            topic_partition,
            checkpoints.slot(RECOVERY_POINT_FILE, directory, topic_partition),
            checkpoints.slot(LOG_START_OFFSET_FILE, directory, topic_partition),
            checkpoints.slot(HIGH_WATERMARK_FILE, directory, topic_partition),
            LeaderEpochCheckpointFile(directory / LEADER_EPOCH_FILE),
        )


@dataclass
class LoadedLog:
    """A partition directory after `load_log`: what PartitionLog starts from."""

    files: PartitionFiles
    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    high_watermark: int
    epochs: LeaderEpochCache
    had_clean_shutdown: bool
    names: frozenset[str]  # the directory's files as listed at open (snapshots among them)


def load_log(directory: Path, config: LogConfig, checkpoints: LogDirCheckpoints) -> LoadedLog:
    """Opens (creating it if needed) the partition directory `directory`, named
    `<topic>-<partition>`, whose offsets `checkpoints` (of its parent) holds; see the module
    docstring. Raises OSError on I/O failure and ValueError for a directory name that is not a
    partition's."""
    topic_partition = TopicPartition.from_directory_name(directory.name)
    names = _listing(directory)  # the one listing, unless a swap is to be completed
    # The directory's marker, or a partition's own (the layout before there was one per log
    # directory: removed at the end, with the leftovers).
    clean = checkpoints.had_clean_shutdown or CLEAN_SHUTDOWN_FILE in names
    names -= _remove_leftovers(directory, names)
    if any(name.endswith(LOG_SUFFIX + SWAP_SUFFIX) for name in names):
        _complete_swaps(directory, config, names)
        names = set(os.listdir(directory))
    files = PartitionFiles.of(directory, topic_partition, checkpoints)
    epochs = LeaderEpochCache(files.leader_epochs)
    stored_recovery_point = files.recovery_point.read() or 0
    segments, recovered = _load_segments(
        directory,
        config,
        epochs,
        names,
        recovery_point=None if clean else stored_recovery_point,
    )
    try:
        return _reconcile(
            directory,
            config,
            files,
            epochs,
            segments,
            recovered,
            stored_recovery_point,
            clean,
            frozenset(names),
        )
    except BaseException:
        for segment in segments:
            segment.close_files()
        raise


def _reconcile(
    directory: Path,
    config: LogConfig,
    files: PartitionFiles,
    epochs: LeaderEpochCache,
    segments: list[LogSegment],
    recovered: list[LogSegment],
    stored_recovery_point: int,
    clean: bool,
    names: frozenset[str],
) -> LoadedLog:
    """Step 5 of the module docstring, then removal of the clean-shutdown marker."""
    log_start_offset = max(files.log_start_offset.read() or 0, segments[0].base_offset)
    if log_start_offset > segments[-1].next_offset:
        # The log start was stored durably but later data was not: start afresh there.
        log.warning("%s: log start %d is past the log end; emptying", directory, log_start_offset)
        for segment in segments:
            segment.delete()
        segments[:] = [LogSegment.create(directory, log_start_offset, config)]
        recovered.clear()
        fsync_directory(directory)
        epochs.clear()
    log_end_offset = segments[-1].next_offset
    epochs.truncate_from_end(log_end_offset)
    epochs.truncate_from_start(log_start_offset)
    # A clean shutdown flushed everything (the stored point may lag: it is written later).
    # After a crash the point stays where it was stored (Kafka's LogLoader): the segments
    # recovered above it are flushed later, as any unflushed data (see `_flush_rebuilt`).
    recovery_point = log_end_offset if clean else min(stored_recovery_point, log_end_offset)
    _flush_rebuilt(segments, recovered, recovery_point)
    files.recovery_point.stage(recovery_point)
    high_watermark = min(max(files.high_watermark.read() or 0, log_start_offset), log_end_offset)
    files.log_start_offset.stage(log_start_offset)
    files.high_watermark.stage(high_watermark)
    if CLEAN_SHUTDOWN_FILE in names:
        unlink_durably([directory / CLEAN_SHUTDOWN_FILE])
    return LoadedLog(
        files,
        segments,
        log_start_offset,
        recovery_point,
        high_watermark,
        epochs,
        clean,
        names,
    )


def _flush_rebuilt(
    segments: list[LogSegment], recovered: list[LogSegment], recovery_point: int
) -> None:
    """fsyncs the recovered segments a later start would trust without recovering them: those
    below `recovery_point` with a segment after them (their indexes were rebuilt). The last
    segment is recovered again by any unclean start, and a clean one follows a close that
    wrote its indexes out; the segments above the point are what a crash left unflushed.
    Flushing those cost three fsyncs per log (most of a 20,000-replica start after kill -9)."""
    for segment in recovered:
        if segment is not segments[-1] and segment.next_offset <= recovery_point:
            segment.flush()


def _load_segments(
    directory: Path,
    config: LogConfig,
    epochs: LeaderEpochCache,
    names: set[str],
    *,
    recovery_point: int | None,
) -> tuple[list[LogSegment], list[LogSegment]]:
    """(all segments, those recovered). `recovery_point` is None after a clean shutdown;
    `names` are the directory's files."""
    bases = sorted(_segment_bases(names))
    segments: list[LogSegment] = []
    recovered: list[LogSegment] = []

    def learn_epoch(header: BatchHeader) -> None:
        # As Kafka: only epochs newer than the cache's latest; the checkpoint already knows
        # where older ones began (a stale later entry is dropped by truncate_from_end).
        if header.partition_leader_epoch > epochs.latest_epoch:
            epochs.assign(header.partition_leader_epoch, header.base_offset)

    try:
        for position, base in enumerate(bases):
            next_base = bases[position + 1] if position + 1 < len(bases) else None
            unflushed = recovery_point is not None and (
                next_base is None or next_base > recovery_point
            )
            if not unflushed:
                try:
                    segments.append(LogSegment.load(directory, base, config, names))
                    continue
                except (IndexCorruptError, CorruptBatchError) as error:
                    log.warning("%s: rebuilding segment %d: %s", directory, base, error)
            segment, cut_bytes = LogSegment.recovered(directory, base, config, learn_epoch)
            segments.append(segment)
            recovered.append(segment)
            if cut_bytes and unflushed:
                log.warning("%s: cut %d bytes off segment %d", directory, cut_bytes, base)
                _delete_segment_files(directory, bases[position + 1 :])
                break
    except BaseException:
        for segment in segments:
            segment.close_files()
        raise
    if not segments:
        segments.append(LogSegment.create(directory, 0, config))
        fsync_directory(directory)
    return segments, recovered


def _listing(directory: Path) -> set[str]:
    """The names in `directory`, which is created (durably) when missing: no separate check
    for an existing one (issue 18 §1.2: every system call counts 20,000 times)."""
    try:
        return set(os.listdir(directory))
    except FileNotFoundError:
        make_directory_durably(directory)
        return set()


def _segment_bases(names: Iterable[str]) -> list[int]:
    """The base offsets of the segments among the file `names` of a partition directory."""
    bases = []
    for name in names:
        if name.endswith(LOG_SUFFIX):
            base = base_offset_of(Path(name))
            if base is not None and name == file_name(base, LOG_SUFFIX):
                bases.append(base)
    return bases


def _delete_segment_files(directory: Path, bases: list[int]) -> None:
    unlink_durably(
        [directory / file_name(base, suffix) for base in bases for suffix in SEGMENT_SUFFIXES]
    )


def _remove_leftovers(directory: Path, names: set[str]) -> set[str]:
    """Removes files of operations that never committed or already finished, and index files
    whose log file is gone (Kafka deletes these on start too); `names` are the directory's
    files. Returns the names removed."""
    leftovers = {
        name for name in names if name.endswith((_TEMP_SUFFIX, CLEANED_SUFFIX, DELETED_SUFFIX))
    }
    swap_bases = {
        base_offset_of(Path(name)) for name in names if name.endswith(LOG_SUFFIX + SWAP_SUFFIX)
    }
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        for name in names:
            if name.endswith(suffix + SWAP_SUFFIX):
                if base_offset_of(Path(name)) not in swap_bases:
                    leftovers.add(name)
            elif name.endswith(suffix):
                base = base_offset_of(Path(name))
                if base is None or file_name(base, LOG_SUFFIX) not in names:
                    leftovers.add(name)
    unlink_durably([directory / name for name in sorted(leftovers)])
    return leftovers


def _complete_swaps(directory: Path, config: LogConfig, names: set[str]) -> None:
    """Finishes Kafka's swap: `.swap` segments replace the segments whose base offsets lie
    between the smallest swap base offset and the largest swap end offset. `names` are the
    directory's files."""
    swap_paths = sorted(
        directory / name for name in names if name.endswith(LOG_SUFFIX + SWAP_SUFFIX)
    )
    swapped = []
    for path in swap_paths:
        base = base_offset_of(path)
        assert base is not None, path
        segment, _ = LogSegment.recovered(
            directory, base, config, lambda header: None, suffix=SWAP_SUFFIX
        )
        swapped.append(segment)
    low = min(segment.base_offset for segment in swapped)
    high = max(max(segment.next_offset, segment.base_offset + 1) for segment in swapped)
    replaced = [base for base in _segment_bases(names) if low <= base < high]
    log.warning("%s: completing the swap of segments %s", directory, replaced)
    _delete_segment_files(directory, replaced)
    for segment in swapped:
        segment.rename("")
        segment.close_files()
    fsync_directory(directory)
