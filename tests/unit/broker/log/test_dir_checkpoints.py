"""The offset checkpoint files of a log directory (one of each for all its partitions, as Kafka):
the round trip through several logs, writes only of what changed, offsets that must be stored at
once, a torn file that is never trusted (its logs recover in full), and data directories of the
old per-partition layout, which keep working."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pykraft.broker.log import LogConfig, PartitionLog, TopicPartition
from pykraft.broker.log.checkpoints import (
    HIGH_WATERMARK_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    OffsetCheckpointFile,
)
from pykraft.broker.log.dir_checkpoints import CLEAN_SHUTDOWN_FILE, LogDirCheckpoints
from pykraft.broker.log.segment import LogSegment

from .support import NOW_MS, fill, read_all

CONFIG = LogConfig(segment_bytes=300, index_interval_bytes=64)


def _open(directory: Path, checkpoints: LogDirCheckpoints) -> PartitionLog:
    return PartitionLog.open(directory, CONFIG, now_ms=NOW_MS, checkpoints=checkpoints)


def _stored(log_dir: Path, name: str) -> dict[TopicPartition, int]:
    return OffsetCheckpointFile(log_dir / name).read()


def test_the_logs_of_a_directory_share_one_file_of_each_kind(tmp_path: Path) -> None:
    checkpoints = LogDirCheckpoints(tmp_path)
    logs = [_open(tmp_path / f"t-{number}", checkpoints) for number in range(3)]
    for number, log in enumerate(logs):
        fill(log, 4 + number)
        log.update_high_watermark(5 + number)
        log.delete_records_before(1 + number)
        log.close()
    checkpoints.write_all()
    assert _stored(tmp_path, HIGH_WATERMARK_FILE) == {
        TopicPartition("t", number): 5 + number for number in range(3)
    }
    assert (tmp_path / HIGH_WATERMARK_FILE).read_text() == "0\n3\nt 0 5\nt 1 6\nt 2 7\n"
    assert _stored(tmp_path, LOG_START_OFFSET_FILE)[TopicPartition("t", 2)] == 3
    assert _stored(tmp_path, RECOVERY_POINT_FILE)[TopicPartition("t", 1)] == 15
    assert not any((tmp_path / "t-0" / name).exists() for name in (HIGH_WATERMARK_FILE,))

    restarted = LogDirCheckpoints(tmp_path)
    reopened = [_open(tmp_path / f"t-{number}", restarted) for number in range(3)]
    assert [(log.high_watermark, log.log_start_offset) for log in reopened] == [
        (5, 1),
        (6, 2),
        (7, 3),
    ]


def test_only_files_whose_entries_changed_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoints = LogDirCheckpoints(tmp_path)
    log = _open(tmp_path / "t-0", checkpoints)
    fill(log, 3)
    log.close()
    checkpoints.write_all()
    replaced: list[str] = []
    real_replace = os.replace

    def replace(source: str | Path, target: str | Path) -> None:
        if "offset-checkpoint" in str(target):
            replaced.append(Path(target).name)
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    checkpoints.write_all()
    log = _open(tmp_path / "t-0", checkpoints)
    log.close()
    checkpoints.write_all()
    assert replaced == []  # an idle partition's restart rewrites nothing
    log = _open(tmp_path / "t-0", checkpoints)
    log.update_high_watermark(4)
    log.stage_checkpoints()
    checkpoints.write_all()
    assert replaced == [HIGH_WATERMARK_FILE]


def test_truncation_below_a_stored_offset_stores_the_directory_at_once(tmp_path: Path) -> None:
    """As Kafka's truncateTo: a crash right after must not bring back a recovery point (or high
    watermark) above data that a later append rewrites unflushed."""
    checkpoints = LogDirCheckpoints(tmp_path)
    log = _open(tmp_path / "t-0", checkpoints)
    fill(log, 10)
    log.update_high_watermark(30)
    log.flush()
    log.stage_checkpoints()
    checkpoints.write_all()
    log.truncate_to(12)
    key = TopicPartition("t", 0)
    assert _stored(tmp_path, RECOVERY_POINT_FILE)[key] == 12
    assert _stored(tmp_path, HIGH_WATERMARK_FILE)[key] == 12


def test_delete_records_is_stored_at_once(tmp_path: Path) -> None:
    checkpoints = LogDirCheckpoints(tmp_path)
    log = _open(tmp_path / "t-0", checkpoints)
    fill(log, 10)
    log.update_high_watermark(30)
    log.delete_records_before(7)
    assert _stored(tmp_path, LOG_START_OFFSET_FILE)[TopicPartition("t", 0)] == 7


def _crashed_log_with_segments(log_dir: Path) -> int:
    """A log of many segments, every byte flushed and its recovery point stored, then left as
    a crash leaves it (no clean-shutdown marker); returns its segment count."""
    checkpoints = LogDirCheckpoints(log_dir)
    log = _open(log_dir / "t-0", checkpoints)
    fill(log, 30)
    log.flush()
    segment_count = len(log.segments())
    log.close()
    checkpoints.write_all()  # and no mark_clean_shutdown: as a crash leaves it
    return segment_count


def _recovered_segments(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    recovered: list[int] = []
    real_recover = LogSegment.recover

    def recover(segment: LogSegment, *args: object, **kwargs: object) -> int:
        recovered.append(segment.base_offset)
        return real_recover(segment, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "recover", recover)
    return recovered


def test_an_unclean_start_recovers_only_above_the_stored_recovery_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    segment_count = _crashed_log_with_segments(tmp_path)
    assert segment_count > 3
    recovered = _recovered_segments(monkeypatch)
    log = _open(tmp_path / "t-0", LogDirCheckpoints(tmp_path))
    assert len(recovered) == 1 and recovered[0] == log.segments()[-1].base_offset
    assert [offset for offset, _ in read_all(log)] == list(range(90))


def _crashed_below(log_dir: Path, recovery_point: int) -> None:
    """The log of `_crashed_log_with_segments`, with `recovery_point` stored instead."""
    _crashed_log_with_segments(log_dir)
    stored = {TopicPartition("t", 0): recovery_point}
    OffsetCheckpointFile(log_dir / RECOVERY_POINT_FILE).write(stored)


@pytest.mark.parametrize(("stored", "recovered_min"), [(45, 3), (90, 1)])
def test_an_unclean_start_fsyncs_nothing_and_leaves_the_recovered_segments_unflushed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fsynced_paths: list[Path],
    stored: int,
    recovered_min: int,
) -> None:
    """As Kafka's LogLoader: recovery verifies and cuts, but the recovery point stays where it
    was stored (three fsyncs per log were most of a 20,000-replica start after kill -9). The
    last segment, recovered even when the point is its end, is recovered again by the next
    unclean start: flushing it would make nothing safer."""
    _crashed_below(tmp_path, stored)
    recovered = _recovered_segments(monkeypatch)
    fsynced_paths.clear()
    log = _open(tmp_path / "t-0", LogDirCheckpoints(tmp_path))
    assert len(recovered) >= recovered_min
    assert [path for path in fsynced_paths if path.parent.name == "t-0"] == []
    assert log.recovery_point == stored
    assert [offset for offset, _ in read_all(log)] == list(range(90))


def test_a_roll_after_an_unclean_start_fsyncs_every_segment_it_moves_the_point_past(
    tmp_path: Path, fsynced_paths: list[Path]
) -> None:
    _crashed_below(tmp_path, 45)
    log = _open(tmp_path / "t-0", LogDirCheckpoints(tmp_path))
    unflushed = {s.path for s in log.segments() if s.last_offset >= 45}
    fsynced_paths.clear()
    log.roll(now_ms=NOW_MS)
    assert log.recovery_point == 90
    assert {path for path in fsynced_paths if path.suffix == ".log"} == unflushed


@pytest.mark.parametrize("cut", [1, 5, 9])
def test_a_torn_recovery_point_file_is_not_trusted_and_every_segment_is_recovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut: int
) -> None:
    segment_count = _crashed_log_with_segments(tmp_path)
    path = tmp_path / RECOVERY_POINT_FILE
    path.write_bytes(path.read_bytes()[:-cut])  # "0\n1\nt 0 90\n" cut short anywhere
    recovered = _recovered_segments(monkeypatch)
    checkpoints = LogDirCheckpoints(tmp_path)
    log = _open(tmp_path / "t-0", checkpoints)
    assert len(recovered) == segment_count
    assert [offset for offset, _ in read_all(log)] == list(range(90))
    log.close()
    checkpoints.write_all()  # the damaged file is replaced by a whole one
    assert _stored(tmp_path, RECOVERY_POINT_FILE) == {TopicPartition("t", 0): 90}


def _old_layout(partition_dir: Path, offsets: dict[str, int]) -> None:
    """The per-partition checkpoint files of data directories written before this layout."""
    for name, offset in offsets.items():
        OffsetCheckpointFile(partition_dir / name).write({TopicPartition("t", 0): offset})


def test_old_per_partition_files_are_read_then_moved_into_the_directorys(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", CONFIG, now_ms=NOW_MS)  # keeps the old layout
    fill(log, 10)
    log.close()
    _old_layout(
        tmp_path / "t-0",
        {RECOVERY_POINT_FILE: 30, HIGH_WATERMARK_FILE: 25, LOG_START_OFFSET_FILE: 4},
    )
    checkpoints = LogDirCheckpoints(tmp_path)
    log = _open(tmp_path / "t-0", checkpoints)
    assert (log.high_watermark, log.log_start_offset) == (25, 4)
    assert (tmp_path / "t-0" / HIGH_WATERMARK_FILE).exists()  # until the directory's is stored
    log.close()
    checkpoints.write_all()
    key = TopicPartition("t", 0)
    assert _stored(tmp_path, HIGH_WATERMARK_FILE) == {key: 25}
    assert _stored(tmp_path, LOG_START_OFFSET_FILE) == {key: 4}
    assert not any(
        (tmp_path / "t-0" / name).exists()
        for name in (RECOVERY_POINT_FILE, HIGH_WATERMARK_FILE, LOG_START_OFFSET_FILE)
    )


def test_old_files_are_not_trusted_when_the_directorys_file_is_damaged(tmp_path: Path) -> None:
    """An old per-partition file may be older than what the damaged file held (a truncation
    since), so the damage means no offset at all, never the old file's."""
    log = PartitionLog.open(tmp_path / "t-0", CONFIG, now_ms=NOW_MS)
    fill(log, 10)
    log.close()
    _old_layout(tmp_path / "t-0", {HIGH_WATERMARK_FILE: 25})
    (tmp_path / HIGH_WATERMARK_FILE).write_text("0\n1\nt 0 2")
    log = _open(tmp_path / "t-0", LogDirCheckpoints(tmp_path))
    assert log.high_watermark == 0


def test_a_clean_shutdown_is_one_marker_per_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's LogManager: one `.kafka_cleanshutdown` in the log directory once every log there
    was closed, none per partition; the next start trusts every log there without recovery,
    and takes the marker away before opening any, so a crash from then on is seen."""
    checkpoints = LogDirCheckpoints(tmp_path)
    logs = [_open(tmp_path / f"t-{number}", checkpoints) for number in range(3)]
    for log in logs:
        fill(log, 20)
        log.close()
    checkpoints.write_all()
    checkpoints.mark_clean_shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert not list(tmp_path.glob(f"*/{CLEAN_SHUTDOWN_FILE}"))
    recovered = _recovered_segments(monkeypatch)
    restarted = LogDirCheckpoints(tmp_path)
    assert restarted.had_clean_shutdown and not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    reopened = [_open(tmp_path / f"t-{number}", restarted) for number in range(3)]
    assert all(log.had_clean_shutdown for log in reopened) and recovered == []
    assert not LogDirCheckpoints(tmp_path).had_clean_shutdown


def test_a_partitions_own_marker_of_the_old_layout_is_accepted_then_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = PartitionLog.open(tmp_path / "t-0", CONFIG, now_ms=NOW_MS)  # keeps the old layout
    fill(log, 20)
    log.close()
    assert (tmp_path / "t-0" / CLEAN_SHUTDOWN_FILE).exists()
    recovered = _recovered_segments(monkeypatch)
    reopened = _open(tmp_path / "t-0", LogDirCheckpoints(tmp_path))
    assert reopened.had_clean_shutdown and recovered == []
    assert not (tmp_path / "t-0" / CLEAN_SHUTDOWN_FILE).exists()
