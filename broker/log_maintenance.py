"""The background work Kafka's LogManager does for every log a broker hosts: the log directories'
offset checkpoint files written every log.flush.offset.checkpoint.interval.ms, a retention pass
every log.retention.check.interval.ms (segments past retention.ms or retention.bytes, or wholly
below the log start offset, are deleted), and compaction of cleanup.policy=compact logs by the
LogCleaner every log.cleaner.backoff.ms.

The replica manager tells this module when a log opens, changes config and is about to close
(`track`, `untrack`), so the cleaner never touches a log being closed or deleted. Time is wall
clock: retention and the cleaner compare it with record timestamps.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Final

from pykraft.broker.log import LogError, PartitionLog
from pykraft.broker.log.cleaner import LogCleaner

log = logging.getLogger(__name__)

# Kafka's log.retention.check.interval.ms and log.cleaner.backoff.ms defaults.
RETENTION_CHECK_INTERVAL_MS: Final = 300_000
CLEANER_BACKOFF_MS: Final = 15_000
# Kafka's log.flush.offset.checkpoint.interval.ms default.
CHECKPOINT_INTERVAL_MS: Final = 60_000


class LogMaintenance:
    def __init__(
        self,
        logs: Callable[[], Iterable[PartitionLog]],
        *,
        wall_clock_ms: Callable[[], int],
        retention_check_interval_ms: int = RETENTION_CHECK_INTERVAL_MS,
        cleaner_backoff_ms: int = CLEANER_BACKOFF_MS,
        checkpoint: Callable[[], None] = lambda: None,
        checkpoint_interval_ms: int = CHECKPOINT_INTERVAL_MS,
    ) -> None:
        """`checkpoint` writes the log directories' offset checkpoint files, every
        `checkpoint_interval_ms` (Kafka's log.flush.offset.checkpoint.interval.ms)."""
        assert retention_check_interval_ms > 0 and checkpoint_interval_ms > 0
        self._checkpoint = checkpoint
        self._checkpoint_interval_ms = checkpoint_interval_ms
        self._logs = logs
        self._wall_clock_ms = wall_clock_ms
        self._interval_ms = retention_check_interval_ms
        self._cleaner = LogCleaner(interval_ms=cleaner_backoff_ms, clock_ms=wall_clock_ms)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="log-retention", daemon=True)

    def track(self, partition_log: PartitionLog) -> None:
        """A log opened or changed config: compacted ones are cleaned, others not."""
        if "compact" in partition_log.config.cleanup_policy:
            self._cleaner.register(partition_log)
        else:
            self._cleaner.unregister(partition_log)

    def untrack(self, partition_log: PartitionLog) -> None:
        """Before a log is closed or deleted: once this returns the cleaner leaves it alone."""
        self._cleaner.unregister(partition_log)

    def start(self) -> None:
        self._cleaner.start()
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()
        self._cleaner.stop()

    def retain_now(self) -> int:
        """One retention pass over every log; returns the segments deleted."""
        deleted = 0
        now_ms = self._wall_clock_ms()
        for partition_log in self._logs():
            try:
                deleted += partition_log.delete_old_segments(now_ms=now_ms)
            except LogError as error:  # closed meanwhile, or offline: the next pass retries
                log.debug("retention of %s skipped: %s", partition_log.directory, error)
        return deleted

    def _run(self) -> None:
        retention_due_s = time.monotonic() + self._interval_ms / 1000
        checkpoint_due_s = time.monotonic() + self._checkpoint_interval_ms / 1000
        while not self._stopping.wait(
            max(0.0, min(retention_due_s, checkpoint_due_s) - time.monotonic())
        ):
            if time.monotonic() >= checkpoint_due_s:
                self._checkpoint()
                checkpoint_due_s = time.monotonic() + self._checkpoint_interval_ms / 1000
            if time.monotonic() >= retention_due_s:
                deleted = self.retain_now()
                if deleted:
                    log.info("retention deleted %d segments", deleted)
                retention_due_s = time.monotonic() + self._interval_ms / 1000
