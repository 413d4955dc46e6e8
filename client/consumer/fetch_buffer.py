"""One partition's answer to a Fetch, kept as the raw batch bytes until `poll` reaches it.

The fetcher thread builds a `CompletedFetch` and hands it over; from then on only the
consumer's thread touches it, so it needs no lock. Building one walks the batch headers (to
learn the offset to fetch next) but neither checks a CRC nor decodes a record: `take` and
`next_record` decompress, verify (with check_crcs) and decode one batch at a time, when the
records before it have been handed out. A fetch that ends in an error carries the error and
no bytes, in its place in the partition's queue.

What callers may rely on: records come out in offset order, each once, none below the fetch
offset and none from control batches; `position` is always the offset of the next record to
hand out, past skipped control batches and compacted gaps, and `leader_epoch` the epoch of the
batch the records being handed out come from. A batch that fails to decode stops
the fetch there for good: every later `take` raises the same error (as Kafka's consumer keeps
raising until the application seeks past the batch).

`last_epoch` is the leader epoch of the answer's last batch: the next Fetch sends it as
`last_fetched_epoch`, so the leader can tell whether its log still holds what was fetched
(KIP-320). A leader that says it does not answers `diverging_epoch`, which becomes a
`CompletedFetch.diverged` in the partition's queue (see `truncation`).
"""

from __future__ import annotations

from typing import Final

from pykraft.client.errors import KafkaError, LogTruncationError, error_for
from pykraft.client.types import ConsumerRecord, TopicPartition
from pykraft.proto import common_pb2, extensions
from pykraft.proto.record_batch import (
    BatchError,
    BatchHeader,
    Record,
    TimestampType,
    decode_batch,
    iter_batches,
)

_NO_RECORDS: Final[list[ConsumerRecord]] = []


class CompletedFetch:
    """Raw batches of one partition from `fetch_offset` on (or an error), read lazily."""

    __slots__ = (
        "_batch_next_offset",
        "_check_crcs",
        "_cursor",
        "_data",
        "_end",
        "_error",
        "_index",
        "_records",
        "diverging",
        "error",
        "fetch_offset",
        "last_epoch",
        "leader_epoch",
        "next_offset",
        "position",
        "size_bytes",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        data: bytes,
        *,
        end: int,
        next_offset: int,
        check_crcs: bool,
        error: KafkaError | None = None,
        last_epoch: int | None = None,
        diverging: tuple[int, int] | None = None,
    ) -> None:
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.next_offset = next_offset  # the offset to fetch after this answer
        self.last_epoch = last_epoch  # the leader epoch of the last batch (None: unknown)
        self.position = fetch_offset  # the next offset to hand out
        # The partition leader epoch of the batch whose records are being handed out.
        self.leader_epoch: int | None = None
        self.size_bytes = len(data)
        self.error = error  # an answer that is an error, not data
        # The leader's (epoch, end offset) where its log parts from what was fetched.
        self.diverging = diverging
        self._data = data
        self._end = end  # the byte after the last whole batch
        self._check_crcs = check_crcs
        self._cursor = 0  # the byte where the next undecoded batch starts
        self._records = _NO_RECORDS  # the current batch's records from `position` on
        self._index = 0
        self._batch_next_offset = fetch_offset
        self._error: KafkaError | None = None  # a batch that failed to decode

    @classmethod
    def of_records(
        cls, tp: TopicPartition, fetch_offset: int, data: bytes, *, check_crcs: bool
    ) -> CompletedFetch | None:
        """The fetch of `data`, or None when it holds no whole batch past `fetch_offset` (an
        empty answer). Raises CorruptMessageError when a batch's length or magic is wrong."""
        end, next_offset, last_epoch = 0, fetch_offset, -1
        try:
            for position, header in iter_batches(data, verify=False):
                end = position + header.size_bytes
                next_offset = max(next_offset, header.next_offset)
                last_epoch = header.partition_leader_epoch
        except BatchError as e:
            raise error_for(e.error_code, f"{tp} at offset {fetch_offset}: {e}") from None
        if next_offset == fetch_offset:
            return None
        return cls(
            tp,
            fetch_offset,
            data,
            end=end,
            next_offset=next_offset,
            check_crcs=check_crcs,
            last_epoch=last_epoch if last_epoch >= 0 else None,
        )

    @classmethod
    def failed(cls, tp: TopicPartition, fetch_offset: int, error: KafkaError) -> CompletedFetch:
        """An error answer, kept in the partition's queue after the data fetched before it."""
        return cls(
            tp, fetch_offset, b"", end=0, next_offset=fetch_offset, check_crcs=False, error=error
        )

    @classmethod
    def diverged(
        cls, tp: TopicPartition, fetch_offset: int, epoch: int, end_offset: int
    ) -> CompletedFetch:
        """The leader's answer that its log parts from what was fetched at `end_offset`
        (the end of `epoch` in its log); an error entry, so nothing more is fetched until the
        consumer's thread has dealt with it."""
        error = LogTruncationError(
            f"{tp}: the leader's log parts from what was fetched below offset {fetch_offset} "
            f"at offset {end_offset} (the end of its leader epoch {epoch})"
        )
        fetch = cls.failed(tp, fetch_offset, error)
        fetch.diverging = (epoch, end_offset)
        return fetch

    @property
    def exhausted(self) -> bool:
        """Every record handed out (or skipped) and no batch left to decode."""
        return (
            self._index >= len(self._records) and self._cursor >= self._end and self._error is None
        )

    def take(self, out: list[ConsumerRecord], limit: int) -> None:
        """Appends up to `limit` records to `out`. Raises the decode error of the next batch
        only when it could take nothing; otherwise it stops before that batch."""
        start = len(out)
        while (wanted := limit - (len(out) - start)) > 0:
            index = self._index
            if index < len(self._records):
                taken = self._records[index : index + wanted]
                out += taken
                self._index = index + len(taken)
                self._moved_past(taken[-1])
                continue
            try:
                if not self._next_batch():
                    return
            except KafkaError:
                if len(out) == start:
                    raise
                return

    def next_record(self) -> ConsumerRecord | None:
        """The next record, or None once the fetch is exhausted; raises as `take` would."""
        if self._index >= len(self._records) and not self._next_batch():
            return None
        record = self._records[self._index]
        self._index += 1
        self._moved_past(record)
        return record

    def _moved_past(self, record: ConsumerRecord) -> None:
        if self._index < len(self._records):
            self.position = record.offset + 1
        else:  # the batch's last record: past the batch (a compacted tail included)
            self.position = max(record.offset + 1, self._batch_next_offset)

    def _next_batch(self) -> bool:
        """Decodes the next batch with records at or after `position`; False at the end."""
        if self._error is not None:
            raise self._error
        data = self._data
        while self._cursor < self._end:
            header = BatchHeader.parse(data, self._cursor)
            if header.is_control or header.next_offset <= self.position:
                self._cursor += header.size_bytes
                if header.next_offset > self.position:
                    # Past a batch with nothing to hand out: its epoch is the position's.
                    self.leader_epoch = header.partition_leader_epoch
                self.position = max(self.position, header.next_offset)
                continue
            try:
                decoded = decode_batch(data, self._cursor, verify=self._check_crcs)
            except BatchError as e:
                self._error = error_for(e.error_code, self._describe(header, e))
                raise self._error from None
            self._cursor += header.size_bytes
            self._records = consumer_records(
                self.tp.topic, self.tp.partition, header.timestamp_type, decoded, self.position
            )
            self._index = 0
            self._batch_next_offset = header.next_offset
            self.leader_epoch = header.partition_leader_epoch
            if self._records:
                return True
            self.position = max(self.position, header.next_offset)
        self.position = max(self.position, self.next_offset)
        return False

    def _describe(self, header: BatchHeader, error: BatchError) -> str:
        what = (
            "failed its CRC check"
            if error.error_code == common_pb2.CORRUPT_MESSAGE
            else "does not decode"
        )
        return (
            f"{self.tp}: the record batch at offsets {header.base_offset}..{header.last_offset} "
            f"{what} ({error}); seek to {header.next_offset} to skip it"
        )


# ConsumerRecord is a NamedTuple: tuple.__new__ with the eight fields in order builds one
# without a call through its generated __new__.
_new_tuple = tuple.__new__


def consumer_records_python(
    topic: str,
    partition: int,
    timestamp_type: TimestampType,
    records: list[Record],
    position: int,
) -> list[ConsumerRecord]:
    """The batch's records at or after `position`, as the consumer hands them out. The compiled
    `_consumer_records.consumer_records` builds the same tuples."""
    return [
        _new_tuple(
            ConsumerRecord,
            (
                topic,
                partition,
                r.offset,
                r.timestamp,
                timestamp_type,
                r.key,
                r.value,
                tuple((h.key, h.value) for h in r.headers) if r.headers else (),
            ),
        )
        for r in records
        if r.offset >= position
    ]


# Compiled unless disabled or not built (pykraft.proto.extensions).
consumer_records = consumer_records_python
_compiled = extensions.load("pykraft.client.consumer._consumer_records")
if _compiled is not None:
    consumer_records = _compiled.consumer_records
