"""Where a partition's copying resumes after a restart, so a batch written before a kill -9 is
not written again.

The last offset sync of a partition says that source record `upstream` is at target offset
`downstream`, and that everything before it was copied. The mirror may have written more before
it died (acknowledged, or still in flight, but not yet synced): the target partition's records
after `downstream` up to its end, the tail. The restarted copier reads the source again from
`upstream + 1` and compares each record with the tail in order (`TailMatcher`): while they are
equal (key, value, headers, and the timestamp where the target kept the record's own) the
record is already on the target and is not sent again; the first that differs, and everything
after it, is copied. The tail is matched as a prefix only: a record is never skipped on the
strength of a match further on, so a mismatch can only cause a duplicate, never a loss.

What remains possible (the README says it too): a duplicate of the last batches written before
the kill when
- the target leader appended them but its high watermark did not cover them yet when the new
  copier read the partition's end (a follower had not fetched them: normally less than a replica
  fetch round, up to replica.lag.time.max.ms with a stuck follower), or a request of the killed
  process was still on its way to the leader then;
- source records of the tail's range were deleted (retention, compaction, DeleteRecords)
  between the kill and the restart, so the source no longer reads as the tail does;
- another writer wrote to the target partition after the mirror's last sync.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from pykraft.client import Consumer, ConsumerRecord, TopicPartition
from pykraft.mirror.topic_reader import read_partitions

# Kafka's TimestampType.LOG_APPEND_TIME: the broker replaced the record's own timestamp.
_LOG_APPEND_TIME: Final = 1
# The tail a restart reads back per partition, at most: it is the records written after the
# last offset sync, which offset.lag.max and offset.flush.interval.ms keep small.
TAIL_RECORDS_MAX: Final = 1_000_000


class UnaccountedTailError(RuntimeError):
    """A target partition holds more records after the mirror's last offset sync than a restart
    compares (TAIL_RECORDS_MAX): they are not (all) the mirror's, or its syncs were lost. The
    mirror refuses to guess what it copied; mirror into a fresh topic or restore the syncs."""


def same_record(source: ConsumerRecord, target: ConsumerRecord) -> bool:
    """Whether `target` is the copy of `source`: what the mirror copies is equal, the timestamp
    included unless the target topic stamps its own (LogAppendTime)."""
    if target.timestamp_type != _LOG_APPEND_TIME and source.timestamp != target.timestamp:
        return False
    return (
        source.key == target.key
        and source.value == target.value
        and source.headers == target.headers
    )


class TailMatcher:
    """One partition's tail, matched in order against the source records read again."""

    def __init__(self, tail: Sequence[ConsumerRecord]) -> None:
        self._tail = tail
        self._next = 0
        self.done = not tail

    def match(self, source: ConsumerRecord) -> int | None:
        """The target offset `source` was already copied to, or None: it is new, and the
        matcher is done (every later record is new too)."""
        if self.done:
            return None
        target = self._tail[self._next]
        if not same_record(source, target):
            self.done = True
            return None
        self._next += 1
        self.done = self._next == len(self._tail)
        return target.offset

    @property
    def unmatched(self) -> int:
        """Tail records not matched (left on the target as they are) once done."""
        return len(self._tail) - self._next


def read_tails(
    consumer: Consumer, starts: Mapping[TopicPartition, int | None], timeout_ms: int
) -> dict[TopicPartition, list[ConsumerRecord]]:
    """Each target partition's records from its start (None: its log start) to its end now,
    read with `consumer` (see `read_partitions`). UnaccountedTailError for a tail of over
    TAIL_RECORDS_MAX records."""
    ends = consumer.end_offsets(starts)
    firsts = consumer.beginning_offsets(tp for tp, start in starts.items() if start is None)
    over = sorted(
        str(tp)
        for tp, start in starts.items()
        if ends[tp] - (firsts[tp] if start is None else start) > TAIL_RECORDS_MAX
    )
    if over:
        raise UnaccountedTailError(
            f"target partitions {', '.join(over)} hold over {TAIL_RECORDS_MAX} records after "
            f"the mirror's last offset sync"
        )
    return read_partitions(consumer, starts, timeout_ms)
