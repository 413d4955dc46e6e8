"""LogMaintenance: the broker's retention pass deletes what retention.bytes no longer allows
(never the active segment), and compacted logs are handed to the cleaner while delete-policy
logs are not; the log directories' checkpoint files are written on their own interval."""

from __future__ import annotations

import threading
from pathlib import Path

from pykraft.broker.log import LogConfig, PartitionLog
from pykraft.broker.log_maintenance import LogMaintenance
from pykraft.proto.record_batch import build_batch

NOW_MS = 1_700_000_000_000


def _filled_log(directory: Path, config: LogConfig, batches: int) -> PartitionLog:
    log = PartitionLog.open(directory, config, now_ms=NOW_MS)
    for i in range(batches):
        batch = build_batch([(NOW_MS, b"k%d" % (i % 3), b"v" * 200)])
        log.append_as_leader(batch, leader_epoch=0, now_ms=NOW_MS)
    log.update_high_watermark(log.log_end_offset)
    return log


def test_retention_pass_deletes_old_segments_of_every_log(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1024, retention_bytes=2048)
    logs = [_filled_log(tmp_path / f"t-{p}", config, 40) for p in range(2)]
    maintenance = LogMaintenance(lambda: logs, wall_clock_ms=lambda: NOW_MS)
    segments_before = [len(log.segments()) for log in logs]
    deleted = maintenance.retain_now()
    assert deleted > 0
    for log, before in zip(logs, segments_before, strict=True):
        assert len(log.segments()) < before
        assert log.log_start_offset > 0, "the log start moved past the deleted segments"
        assert log.log_end_offset == 40, "nothing at the end is touched"
    assert maintenance.retain_now() == 0, "a second pass finds nothing more"
    for log in logs:
        log.close()
    assert maintenance.retain_now() == 0, "closed logs are skipped, not an error"


def test_only_compacted_logs_are_cleaned(tmp_path: Path) -> None:
    compacted = _filled_log(
        tmp_path / "c-0", LogConfig(segment_bytes=1024, cleanup_policy=("compact",)), 40
    )
    deleting = _filled_log(tmp_path / "d-0", LogConfig(segment_bytes=1024), 40)
    maintenance = LogMaintenance(lambda: [compacted, deleting], wall_clock_ms=lambda: NOW_MS)
    maintenance.track(compacted)
    maintenance.track(deleting)
    results = maintenance._cleaner.clean_now()
    assert len(results) == 1
    size_after = sum(s.size_bytes for s in compacted.segments())
    assert size_after < 40 * 200, "three keys: the compacted log shrank"
    maintenance.untrack(compacted)
    assert maintenance._cleaner.clean_now() == []
    compacted.close()
    deleting.close()


def test_the_checkpoint_runs_every_interval_apart_from_retention() -> None:
    """The log directories' checkpoint files are written every
    log.flush.offset.checkpoint.interval.ms, however long the retention interval is."""
    checkpoints = threading.Semaphore(0)
    maintenance = LogMaintenance(
        list,
        wall_clock_ms=lambda: NOW_MS,
        retention_check_interval_ms=3_600_000,
        checkpoint=checkpoints.release,
        checkpoint_interval_ms=20,
    )
    maintenance.start()
    try:
        assert all(checkpoints.acquire(timeout=10) for _ in range(3))
    finally:
        maintenance.stop()
