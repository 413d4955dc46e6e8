"""What every part of a `PartitionLog` shares: its fields, which `PartitionLog.__init__` sets
and its parts (`partition_log_appends`, `partition_log_reads`, `partition_log_truncation`,
mixed into `PartitionLog`) read and change under the lock discipline `partition_log` states,
and the check of the offsets' order that every change ends with."""

from __future__ import annotations

import threading
from pathlib import Path

from pykraft.broker.log.config import LogConfig
from pykraft.broker.log.leader_epochs import LeaderEpochCache
from pykraft.broker.log.local_log import LocalLog
from pykraft.broker.log.log_start import LogStart
from pykraft.broker.log.partition_producers import PartitionProducers
from pykraft.broker.log.recovery import PartitionFiles


class PartitionLogBase:
    """The fields of a PartitionLog (see the module docstring); never made on its own."""

    directory: Path
    _config: LogConfig
    _files: PartitionFiles  # the checkpoint files
    _epochs: LeaderEpochCache
    _local: LocalLog  # the segments
    _start: LogStart
    _producers: PartitionProducers
    _lock: threading.RLock  # serialises mutations; reads take the segments' shared lock
    _log_end_offset: int
    _recovery_point: int
    _high_watermark: int
    _unflushed_messages: int
    _last_flush_ms: int

    def _assert_offsets(self) -> None:
        """The offsets' order, checked after every change: log start <= log end, high
        watermark <= log end, recovery point <= log end."""
        end = self._log_end_offset
        assert 0 <= self._start.offset <= end, (self._start.offset, end)
        assert 0 <= self._high_watermark <= end, (self._high_watermark, end)
        assert 0 <= self._recovery_point <= end, (self._recovery_point, end)

    def _stage_offsets(self) -> None:
        """Hands the recovery point and high watermark to the log directory's checkpoint files,
        which store them at their next write (`dir_checkpoints`)."""
        self._files.recovery_point.stage(self._recovery_point)
        self._files.high_watermark.stage(self._high_watermark)
