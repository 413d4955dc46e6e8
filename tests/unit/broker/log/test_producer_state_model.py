"""Idempotent producers on a partition log, model-based: a state machine sends, retries, rolls,
truncates, deletes, restarts and crashes, and after every step the log's producer state is
checked against an independent reference reading of the leader's rules; the reference itself is
checked against the rules table."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pykraft.broker.log import LogConfig, LogError, PartitionLog
from pykraft.broker.log.producer_state import SEQUENCE_MAX, next_sequence
from pykraft.proto import common_pb2

from .idempotent import NEW, RULES, Sent, append, crash
from .support import NOW_MS, read_all

# --- a model: the log's state against a reference, through every change of the log ---

CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=64, retention_bytes=1200)
PRODUCERS = (1, 2, 3)


@dataclass(frozen=True)
class Written:
    sent: Sent
    first_offset: int

    @property
    def last_offset(self) -> int:
        return self.first_offset + self.sent[3] - 1

    @property
    def sequences(self) -> tuple[int, int]:
        _, _, first, count = self.sent
        return first, next_sequence(first, count - 1)


def reference_outcome(written: Sequence[Written], sent: Sent) -> object:
    """What the leader must answer, from the batches in the log (a plain reading of the rules):
    NEW, the duplicated batch, or an error code."""
    producer_id, epoch, first, count = sent
    mine = [w for w in written if w.sent[0] == producer_id]
    if not mine:
        return NEW if first == 0 else common_pb2.UNKNOWN_PRODUCER_ID
    current = mine[-1].sent[1]
    if epoch == current:
        cached = [w for w in mine if w.sent[1] == current][-5:]
        for candidate in cached:
            if candidate.sequences == (first, next_sequence(first, count - 1)):
                return candidate
    if epoch < current:
        return common_pb2.INVALID_PRODUCER_EPOCH
    expected = 0 if epoch > current else next_sequence(mine[-1].sequences[1])
    return NEW if first == expected else common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER


def reference_entries(
    written: Sequence[Written],
) -> list[tuple[int, int, list[tuple[int, int, int, int]]]]:
    """(producer id, epoch, cached (first seq, last seq, first offset, last offset)) of each
    producer, least recent writer first."""
    entries = []
    for producer_id in PRODUCERS:
        mine = [w for w in written if w.sent[0] == producer_id]
        if not mine:
            continue
        epoch = mine[-1].sent[1]
        cached = [w for w in mine if w.sent[1] == epoch][-5:]
        batches = [(*w.sequences, w.first_offset, w.last_offset) for w in cached]
        entries.append((mine[-1].last_offset, producer_id, epoch, batches))
    return [(p, e, b) for _, p, e, b in sorted(entries)]


class ProducerLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.temp = tempfile.TemporaryDirectory()
        self.directory = Path(self.temp.name) / "model-0"
        self.log = PartitionLog.open(self.directory, CONFIG, now_ms=NOW_MS)
        self.written: list[Written] = []  # every batch the state must know, in offset order
        self.sent: list[Sent] = []  # everything ever sent, for retries

    def teardown(self) -> None:
        self.log.close()
        self.temp.cleanup()

    def _produce(self, sent: Sent) -> None:
        expected = reference_outcome(self.written, sent)
        end = self.log.log_end_offset
        self.sent.append(sent)
        try:
            first, last, duplicate = append(self.log, sent)
        except LogError as error:
            assert error.error_code == expected
            assert self.log.log_end_offset == end
            return
        if expected == NEW:
            assert (first, duplicate) == (end, False)
            self.written.append(Written(sent, first))
        else:
            assert isinstance(expected, Written), expected
            assert (first, last, duplicate) == (expected.first_offset, expected.last_offset, True)
            assert self.log.log_end_offset == end
        self.log.update_high_watermark(self.log.log_end_offset)

    @rule(producer_id=st.sampled_from(PRODUCERS), count=st.integers(1, 3))
    def send_next(self, producer_id: int, count: int) -> None:
        mine = [w for w in self.written if w.sent[0] == producer_id]
        if not mine:
            self._produce((producer_id, 0, 0, count))
            return
        epoch = mine[-1].sent[1]
        self._produce((producer_id, epoch, next_sequence(mine[-1].sequences[1]), count))

    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        if self.sent:
            self._produce(data.draw(st.sampled_from(self.sent[-8:])))

    @rule(
        producer_id=st.sampled_from(PRODUCERS),
        epoch=st.integers(0, 2),
        first=st.sampled_from([0, 1, 2, 5, SEQUENCE_MAX]),
        count=st.integers(1, 3),
    )
    def send_anything(self, producer_id: int, epoch: int, first: int, count: int) -> None:
        self._produce((producer_id, epoch, first, count))

    @rule()
    def roll(self) -> None:
        self.log.roll(now_ms=NOW_MS)

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.log.log_end_offset))
        start = self.log.log_start_offset
        self.log.truncate_to(offset)
        kept = [w for w in self.written if w.last_offset < offset]
        new_end = kept[-1].last_offset + 1 if kept else 0
        if offset < start or new_end < start:  # below the log start: the log was emptied
            kept = []
        self.written = kept

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        log = self.log
        start = log.log_start_offset
        log.delete_records_before(data.draw(st.integers(start, log.high_watermark)))
        if log.log_start_offset > start:
            self._check_old_snapshots_went()

    @rule()
    def retention(self) -> None:
        if self.log.delete_old_segments(now_ms=NOW_MS):
            self._check_old_snapshots_went()

    def _check_old_snapshots_went(self) -> None:
        """Once segments or records went, so did snapshots no load would use."""
        offsets = self.log.producer_snapshot_offsets()
        below_start = [o for o in offsets if o <= self.log.log_start_offset]
        assert len(below_start) <= 1, "only the newest snapshot at or below the start stays"

    @rule()
    def restart(self) -> None:
        self.log.close()
        self.log = PartitionLog.open(self.directory, CONFIG, now_ms=NOW_MS)

    @rule()
    def crash(self) -> None:
        crash(self.log)
        self.log = PartitionLog.open(self.directory, CONFIG, now_ms=NOW_MS)
        self.log.update_high_watermark(self.log.log_end_offset)

    @invariant()
    def state_agrees(self) -> None:
        found = [
            (
                entry.producer_id,
                entry.producer_epoch,
                [(b.first_sequence, b.last_sequence, b.first_offset, b.last_offset)
                 for b in entry.batches],
            )
            for entry in self.log.producers()
        ]  # fmt: skip
        assert found == reference_entries(self.written)

    @invariant()
    def no_record_is_written_twice(self) -> None:
        values = [value for _, value in read_all(self.log)]
        assert len(values) == len(set(values))

    @invariant()
    def snapshots_lie_within_the_log(self) -> None:
        offsets = self.log.producer_snapshot_offsets()
        first_base = self.log.segments()[0].base_offset
        assert all(first_base <= o <= self.log.log_end_offset for o in offsets), offsets


ProducerLogMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=35,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestProducerLogModel = ProducerLogMachine.TestCase


def test_the_reference_agrees_with_the_rules_table() -> None:
    """The model's reference must itself read the rules as the table does."""
    for _, history, sent, expected in RULES:
        if sent[0] < 0 or sent[2] < 0:
            continue  # the reference covers batches with a producer id and a sequence
        offsets = itertools.accumulate([0, *(h[3] for h in history)])
        written = [Written(h, o) for h, o in zip(history, offsets, strict=False)]
        outcome = reference_outcome(written, sent)
        if isinstance(outcome, Written):
            outcome = (outcome.first_offset, outcome.last_offset)
        assert outcome == expected, (history, sent)
