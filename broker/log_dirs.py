"""The broker's log directories and which of them failed (Kafka's LogDirFailureChannel and
offline log dirs).

A storage error (any OSError) while a directory's logs are opened or listed takes the whole
directory offline, as Kafka does: what it holds can no longer be trusted to be served or
acknowledged, and `on_failure` (the replica manager) takes its replicas offline. New
partitions go to the online directory holding the fewest (each directory listed once, its
partition directories counted, then counted in memory); a partition whose directory is offline
stays offline until the broker restarts. Thread-safety is the caller's (the replica
manager holds its lock).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from pykraft.broker.log import TopicPartition

log = logging.getLogger(__name__)


class StorageError(Exception):
    """A partition cannot be opened: its log directory is offline (or every one is)."""


class LogDirs:
    """`dirs` in the broker's order, with the reason each failed directory went offline."""

    def __init__(self, dirs: Iterable[Path], on_failure: Callable[[Path, str], None]) -> None:
        self._dirs = tuple(dirs)
        assert self._dirs, "a broker needs at least one log directory"
        self._on_failure = on_failure
        self._offline: dict[Path, str] = {}
        self._counts: dict[Path, int] = {}  # partitions per directory, once listed

    @property
    def all_offline(self) -> bool:
        return len(self._offline) == len(self._dirs)

    def offline_reason(self, log_dir: Path) -> str | None:
        return self._offline.get(log_dir)

    def fail(self, log_dir: Path, error: object) -> str:
        """Takes `log_dir` offline for `error` (an OSError, or what a log said of one) and
        calls `on_failure` (once: the first reason stays); returns the reason."""
        if log_dir not in self._offline:
            log.error("log directory %s is offline: %s", log_dir, error)
            reason = self._offline[log_dir] = f"log directory {log_dir} is offline: {error}"
            self._on_failure(log_dir, reason)
        return self._offline[log_dir]

    def dir_for(self, directory_name: str) -> Path:
        """The directory already holding `directory_name`, else the online one holding the
        fewest partitions. StorageError if that directory is offline, or every one is."""
        for log_dir in self._dirs:
            if (log_dir / directory_name).exists():
                reason = self._offline.get(log_dir)
                if reason is not None:
                    raise StorageError(reason)
                return log_dir
        counts = {
            d: count for d, count in self._partition_counts().items() if d not in self._offline
        }
        while counts:
            chosen = min(counts, key=lambda d: counts[d])
            if not chosen.exists() or chosen.is_dir():
                self._counts[chosen] += 1
                return chosen
            # Counted in memory, so no listing noticed it: one stat per placement does.
            self.fail(chosen, NotADirectoryError(f"{chosen} is not a directory"))
            del counts[chosen]
        raise StorageError(f"every log directory is offline: {self.reasons()}")

    def removed(self, log_dir: Path) -> None:
        """A partition directory under `log_dir` was deleted (keeps the counts in step)."""
        if log_dir in self._counts:
            self._counts[log_dir] = max(0, self._counts[log_dir] - 1)

    def _partition_counts(self) -> dict[Path, int]:
        """Entries of each directory: listed once (a failure takes it offline), then counted
        up by `dir_for` and down by `removed`."""
        for log_dir in self._dirs:
            if log_dir in self._counts or log_dir in self._offline:
                continue
            try:
                entries = log_dir.iterdir() if log_dir.exists() else iter(())
                self._counts[log_dir] = sum(1 for e in entries if _is_partition_directory(e.name))
            except OSError as error:
                self.fail(log_dir, error)
        return self._counts

    def reasons(self) -> str:
        return "; ".join(self._offline.values()) or "none offline"


def _is_partition_directory(name: str) -> bool:
    """Whether `name` is a partition's (not the directory's checkpoint files, say)."""
    try:
        TopicPartition.from_directory_name(name)
    except ValueError:
        return False
    return True
