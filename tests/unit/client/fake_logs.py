"""The partition logs of the fake cluster (`fake_broker.FakeCluster`): stored batches stamped
with their partition's leader epoch, idempotent producers' sequences checked as the real broker
checks them, reads, offsets by timestamp, and the cuts and damage tests script."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable

from pykraft.client.types import TopicPartition
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import (
    BatchHeader,
    build_batch,
    decode_batch,
    iter_batches,
    rewrite_offsets,
)

PRODUCER_BATCHES_REMEMBERED = 5  # per producer and partition, as the real broker


class FakeLogs:
    """Every partition's log, under `lock` (a Condition notified at every append)."""

    def __init__(self, partitions: Iterable[TopicPartition]) -> None:
        self.lock = threading.Condition()
        self.epochs: dict[TopicPartition, int] = dict.fromkeys(partitions, 0)
        self.logs: dict[TopicPartition, list[bytearray]] = defaultdict(list)
        self.log_start: dict[TopicPartition, int] = defaultdict(int)
        # (tp, producer id) -> its last batches: (first sequence, last sequence, base offset).
        self.producer_batches: dict[tuple[TopicPartition, int], list[tuple[int, int, int]]]
        self.producer_batches = defaultdict(list)

    def end_offset(self, tp: TopicPartition) -> int:
        batches = self.logs[tp]
        return BatchHeader.parse(batches[-1]).next_offset if batches else self.log_start[tp]

    def append(
        self,
        tp: TopicPartition,
        values: list[bytes],
        key: bytes | None = None,
        timestamps: list[int] | None = None,
    ) -> None:
        """Stores one batch of `values` directly, as if produced (timestamps 1000, 1001, ...
        unless given)."""
        times = timestamps or [1000 + i for i in range(len(values))]
        batch = build_batch((t, key, v) for t, v in zip(times, values, strict=True))
        with self.lock:
            self._store(tp, batch)

    def corrupt(self, tp: TopicPartition, batch_index: int) -> None:
        """Flips the last byte of the batch's last value (just before that record's header
        count, 0): the CRC no longer matches, yet the records still decode."""
        with self.lock:
            self.logs[tp][batch_index][-2] ^= 0x01

    def _store(self, tp: TopicPartition, records: bytes) -> int:
        base = self.end_offset(tp)
        next_offset = base
        for position, header in iter_batches(records):
            batch = bytearray(records[position : position + header.size_bytes])
            rewrite_offsets(
                batch, 0, base_offset=next_offset, partition_leader_epoch=self.epochs.get(tp, 0)
            )
            self.logs[tp].append(batch)
            next_offset = BatchHeader.parse(batch).next_offset
        self.lock.notify_all()
        return base

    def idempotent_store(self, tp: TopicPartition, records: bytes) -> tuple[int, int]:
        """Holding the lock: stores a produced batch as the real broker checks it (an error
        code and the base offset). A batch of an idempotent producer must carry the next
        sequence (else OUT_OF_ORDER_SEQUENCE_NUMBER; UNKNOWN_PRODUCER_ID when the partition
        has nothing of the producer and the sequence is not 0); one of its last 5 sent again is
        not stored again and answers with its first offset."""
        header = BatchHeader.parse(records)
        if header.producer_id < 0:
            return common_pb2.NONE, self._store(tp, records)
        remembered = self.producer_batches[(tp, header.producer_id)]
        for first_sequence, _, base in remembered:
            if first_sequence == header.base_sequence:
                return common_pb2.NONE, base
        if not remembered and header.base_sequence != 0:
            return common_pb2.UNKNOWN_PRODUCER_ID, -1
        if remembered and header.base_sequence != remembered[-1][1] + 1:
            return common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        base = self._store(tp, records)
        last_sequence = header.base_sequence + header.record_count - 1
        remembered.append((header.base_sequence, last_sequence, base))
        remembered[:] = remembered[-PRODUCER_BATCHES_REMEMBERED:]
        return common_pb2.NONE, base

    def truncate(self, tp: TopicPartition, offset: int) -> None:
        """Drops every batch from the one holding `offset` on, as a leader elected uncleanly
        (which never had them) would not have them."""
        with self.lock:
            self.logs[tp] = [b for b in self.logs[tp] if BatchHeader.parse(b).base_offset < offset]

    def diverging_epoch(
        self, tp: TopicPartition, last_fetched_epoch: int, fetch_offset: int
    ) -> tuple[int, int] | None:
        """The real leader's answer (broker/isr.py's diverging_epoch): the (epoch, end offset)
        where this log parts from a fetcher whose last batch before `fetch_offset` had
        `last_fetched_epoch`, or None when its log is a prefix of this one."""
        if last_fetched_epoch < 0:
            return None
        starts: dict[int, int] = {}  # epoch -> its first offset, in the log's order
        for batch in self.logs[tp]:
            header = BatchHeader.parse(batch)
            starts.setdefault(header.partition_leader_epoch, header.base_offset)
        known = [e for e in starts if e <= last_fetched_epoch]
        if known:
            epoch = max(known)
            later = [start for e, start in starts.items() if e > epoch]
            end_offset = min(later) if later else self.end_offset(tp)
        elif starts:
            epoch, end_offset = max(starts), self.end_offset(tp)
        else:
            epoch, end_offset = -1, self.log_start[tp]
        if epoch != last_fetched_epoch or end_offset < fetch_offset:
            return epoch, end_offset
        return None

    def values(self, tp: TopicPartition) -> list[bytes | None]:
        """Every stored record's value, in offset order."""
        with self.lock:
            return [r.value for batch in self.logs[tp] for r in decode_batch(batch)]

    def read(self, tp: TopicPartition, offset: int, max_bytes: int) -> bytes:
        """The batches from the one holding `offset` on, within `max_bytes` but the first."""
        out = bytearray()
        for batch in self.logs[tp]:
            if BatchHeader.parse(batch).next_offset <= offset:
                continue
            if out and len(out) + len(batch) > max_bytes:
                break
            out += batch
        return bytes(out)

    def offset_for(self, tp: TopicPartition, timestamp: int) -> tuple[int, int]:
        """ListOffsets' answer: -2 the log start, -1 the end, else the first record at or
        after `timestamp` ((-1, -1) when there is none)."""
        if timestamp == -2:
            return self.log_start[tp], -1
        if timestamp == -1:
            return self.end_offset(tp), -1
        for batch in self.logs[tp]:
            for r in decode_batch(batch):
                if r.offset >= self.log_start[tp] and r.timestamp >= timestamp:
                    return r.offset, r.timestamp
        return -1, -1
