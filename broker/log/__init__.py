"""The partition log storage engine: a directory of segments per partition replica, as Kafka's.

`PartitionLog` is the one class the broker uses; `LogConfig` its settings; `LogError` carries
Kafka's error code. `SegmentInfo` and `PartitionLog.replace_segments` are the hooks for the log
cleaner. The files are byte-compatible with Kafka's (segments, indexes, checkpoints).
"""

from __future__ import annotations

from pykraft.broker.log.checkpoints import EpochEntry, TopicPartition
from pykraft.broker.log.config import LogConfig
from pykraft.broker.log.errors import LogError
from pykraft.broker.log.files import FileRange
from pykraft.broker.log.leader_epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from pykraft.broker.log.partition_log import PartitionLog
from pykraft.broker.log.results import AppendInfo, RangeRead, ReadResult
from pykraft.broker.log.segment import SegmentInfo

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "AppendInfo",
    "EpochEntry",
    "FileRange",
    "LogConfig",
    "LogError",
    "PartitionLog",
    "RangeRead",
    "ReadResult",
    "SegmentInfo",
    "TopicPartition",
]
