"""Model-based test: random sequences of appends, reads, timestamp lookups, truncations, rolls,
retention passes, record deletion, clean restarts and crashes, with small segments, checked
after every step against a plain list of batches and three offsets (log start, end, high
watermark). A crash closes the files without flushing or writing the clean-shutdown marker, as
a killed process would leave them (its page cache survives)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pykraft.broker.log import LogConfig, PartitionLog
from pykraft.proto.record_batch import build_batch

from .support import NOW_MS, read_all, records

CONFIG = LogConfig(
    segment_bytes=400, index_interval_bytes=64, retention_bytes=1500, retention_ms=20_000
)
VALUES = st.lists(st.binary(max_size=40), min_size=1, max_size=4)


@dataclass(frozen=True)
class ModelBatch:
    base_offset: int
    values: tuple[bytes, ...]
    epoch: int
    timestamp: int

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.values)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.temp = tempfile.TemporaryDirectory()
        self.directory = Path(self.temp.name) / "model-0"
        self.log = PartitionLog.open(self.directory, CONFIG, now_ms=NOW_MS)
        self.batches: list[ModelBatch] = []
        self.floor = 0  # where the batches begin (moved by truncation below the log start)
        self.log_start = 0
        self.high_watermark = 0
        self.epoch = 0
        self.now_ms = NOW_MS

    @property
    def end(self) -> int:
        return self.batches[-1].next_offset if self.batches else self.floor

    def model_records(self) -> list[tuple[int, int, bytes]]:
        """(offset, timestamp, value) of every record at or above the log start."""
        return [
            (batch.base_offset + index, batch.timestamp, value)
            for batch in self.batches
            for index, value in enumerate(batch.values)
            if batch.base_offset + index >= self.log_start
        ]

    def teardown(self) -> None:
        self.log.close()
        self.temp.cleanup()

    @rule(
        requests=st.lists(VALUES, min_size=1, max_size=5),
        bump=st.booleans(),
        advance_ms=st.integers(0, 3000),
    )
    def append(self, requests: list[list[bytes]], bump: bool, advance_ms: int) -> None:
        self.epoch += bump
        self.now_ms += advance_ms
        data = b"".join(
            build_batch([(self.now_ms, None, v) for v in values]) for values in requests
        )
        info = self.log.append_as_leader(data, leader_epoch=self.epoch, now_ms=self.now_ms)
        assert info.first_offset == self.end and info.batch_count == len(requests)
        for values in requests:
            self.batches.append(ModelBatch(self.end, tuple(values), self.epoch, self.now_ms))
        assert info.last_offset == self.end - 1

    @rule(data=st.data(), bytes_max=st.integers(0, 600), committed=st.booleans())
    def read(self, data: st.DataObject, bytes_max: int, committed: bool) -> None:
        offset = data.draw(st.integers(self.log_start, self.end))
        upper = self.high_watermark if committed else None
        result = self.log.read(offset, bytes_max=bytes_max, upper_offset=upper)
        containing = [b for b in self.batches if b.base_offset <= offset < b.next_offset]
        bound = self.end if upper is None else upper
        returned = [(r.offset, r.value) for r in records(result.data)]
        if not containing or containing[0].next_offset > bound:
            assert result.data == b"" and result.next_offset == offset
            return
        assert result.first_offset == containing[0].base_offset and offset < result.next_offset
        assert result.next_offset <= bound
        expected = [
            (batch.base_offset + index, value)
            for batch in self.batches
            if containing[0].base_offset <= batch.base_offset < result.next_offset
            for index, value in enumerate(batch.values)
        ]
        assert returned == expected
        first_size = len(build_batch([(0, None, v) for v in containing[0].values]))
        assert len(result.data) <= max(bytes_max, first_size)

    @rule(data=st.data())
    def lookup_timestamp(self, data: st.DataObject) -> None:
        timestamp = data.draw(st.integers(NOW_MS - 10, self.now_ms + 10))
        later = [(o, t) for o, t, _ in self.model_records() if t >= timestamp]
        assert self.log.offset_for_timestamp(timestamp) == (later[0] if later else None)

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.end))
        self.log.truncate_to(offset)
        if offset >= self.end:
            return
        if offset < self.log_start:
            self.batches, self.floor, self.log_start = [], offset, offset
        else:
            self.batches = [b for b in self.batches if b.next_offset <= offset]
            if self.end < self.log_start:  # the dropped batch held the log start
                self.batches, self.floor = [], self.log_start
        self.high_watermark = min(self.high_watermark, self.end)

    @rule()
    def roll(self) -> None:
        self.log.roll(now_ms=self.now_ms)

    @rule(data=st.data())
    def update_high_watermark(self, data: st.DataObject) -> None:
        self.high_watermark = data.draw(st.integers(self.high_watermark, self.end))
        self.log.update_high_watermark(self.high_watermark)

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.high_watermark))
        self.log.delete_records_before(offset)
        self.log_start = offset

    @rule(advance_ms=st.integers(0, 30_000))
    def retention(self, advance_ms: int) -> None:
        deleted = self.log.delete_old_segments(now_ms=self.now_ms + advance_ms)
        new_start = self.log.log_start_offset
        assert self.log_start <= new_start <= self.high_watermark
        assert deleted > 0 or new_start == self.log_start
        boundaries = {b.base_offset for b in self.batches} | {self.log_start, self.end}
        assert new_start in boundaries
        self.log_start = new_start

    @rule()
    def restart(self) -> None:
        self.log.close()
        self.log = PartitionLog.open(self.directory, CONFIG, now_ms=self.now_ms)
        assert self.log.had_clean_shutdown

    @rule()
    def crash(self) -> None:
        self.log._local.close()  # files closed as a killed process leaves them
        self.log = PartitionLog.open(self.directory, CONFIG, now_ms=self.now_ms)
        assert not self.log.had_clean_shutdown
        # The high watermark is stored on flush only, so a crash may take it back.
        assert self.log_start <= self.log.high_watermark <= self.high_watermark
        self.high_watermark = self.log.high_watermark

    @invariant()
    def offsets_agree(self) -> None:
        assert (self.log.log_start_offset, self.log.log_end_offset) == (self.log_start, self.end)
        assert self.log.high_watermark == self.high_watermark

    @invariant()
    def records_agree(self) -> None:
        assert read_all(self.log) == [(o, v) for o, _, v in self.model_records()]

    @invariant()
    def epochs_agree(self) -> None:
        live = [b for b in self.batches if b.next_offset > self.log_start]
        for batch in live:
            later = [b.base_offset for b in live if b.epoch > batch.epoch]
            expected = (batch.epoch, later[0] if later else self.end)
            assert self.log.end_offset_for_epoch(batch.epoch) == expected


LogMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestPartitionLogModel = LogMachine.TestCase
