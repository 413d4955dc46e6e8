"""`read_range` (a Spark task's read) when the partition's log was truncated under it.

Against the client's in-process fake brokers, without a SparkSession: the task reads offsets
0..9 (leader epoch 0) of a range [0, 12), then an unclean election cuts the log at 6 and the
new leader (epoch 1) takes other records at 6 on. The executor's consumer (auto_offset_reset
"none") raises LogTruncationError. As Spark's Kafka source treats data loss, the task fails
with failOnDataLoss=true and says why; with false it reads on from its position in the new
history, never going back over records it already gave Spark.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.client import TopicPartition
from pykraft.spark import source
from pykraft.spark.offsets import OffsetRange
from pykraft.spark.options import SourceOptions
from tests.unit.client.fake_broker import FakeCluster, running

T0 = TopicPartition("t", 0)
OLD = [b"a%d" % i for i in range(10)]
NEW = [b"b%d" % i for i in range(6, 12)]
TASK = OffsetRange("t", 0, 0, 12)
Read = list[tuple[int, bytes]]


@pytest.fixture(autouse=True)
def _fresh_consumers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Short stalls, and the worker's cached consumers closed after each test."""
    monkeypatch.setattr(source, "READ_STALL_MS_MAX", 3_000)
    yield
    for consumers in source._consumers.values():
        for consumer in consumers:
            consumer.close()
    source._consumers.clear()


def options(cluster: FakeCluster, fail_on_data_loss: bool) -> SourceOptions:
    given = {"bootstrap.servers": cluster.bootstrap, "subscribe": "t"}
    return SourceOptions.parse(
        {**given, "failOnDataLoss": str(fail_on_data_loss).lower()}, batch=True
    )


def read_until(batches: Iterator[object], last_offset: int) -> Read:
    """(offset, value) of the batches read until the record at `last_offset`."""
    read: Read = []
    while not read or read[-1][0] < last_offset:
        read += rows(next(batches))
    return read


def rows(batch: object) -> Read:
    columns = batch.to_pydict()  # type: ignore[attr-defined]
    return list(zip(columns["offset"], columns["value"], strict=True))


def unclean_election(cluster: FakeCluster, new: list[bytes]) -> None:
    """Broker 2 leads in epoch 1 with offsets 0..5 only, then takes `new` at 6 on."""
    cluster.truncate(T0, 6)
    cluster.move_leader(T0, 2)
    cluster.append(T0, new)


def read_old_then_elect(cluster: FakeCluster, opts: SourceOptions, new: list[bytes]) -> Read:
    """Reads the task's range across the election; (offset, value) of every record yielded."""
    cluster.append(T0, OLD[:6])
    cluster.append(T0, OLD[6:])
    batches = source.read_ranges(opts, [TASK])
    read = read_until(batches, 9)
    unclean_election(cluster, new)
    for batch in batches:
        read += rows(batch)
    return read


def test_truncation_fails_the_task_by_default_and_names_where() -> None:
    with running({"t": 1}, brokers=2) as cluster, pytest.raises(RuntimeError) as raised:
        read_old_then_elect(cluster, options(cluster, True), NEW)
    message = str(raised.value)
    assert "truncated" in message and "unclean leader election" in message, message
    assert "t-0" in message or str(T0) in message, message
    assert "offset 10" in message, message  # the task's position
    assert "from offset 6 on may differ" in message, message  # the divergent offset
    assert "failOnDataLoss=false" in message, message
    assert "retention" not in message, message


def test_without_fail_on_data_loss_it_reads_on_in_the_new_history(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with running({"t": 1}, brokers=2) as cluster:
        read = read_old_then_elect(cluster, options(cluster, False), NEW)
    # 0..9 once each (never read again from the log start), then the new history's 10, 11.
    assert read == [*enumerate(OLD), (10, b"b10"), (11, b"b11")]
    assert any("truncated" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")


def test_without_fail_on_data_loss_a_shorter_new_history_is_not_read_again() -> None:
    """The new leader's log ends (8) below the task's position (10): nothing of the range is
    left to read there, and records already yielded are not yielded again."""
    with running({"t": 1}, brokers=2) as cluster:
        read = read_old_then_elect(cluster, options(cluster, False), NEW[:2])
    assert read == list(enumerate(OLD))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 50), min_size=1, max_size=40, unique=True).map(sorted),
    st.integers(0, 60),
)
def test_rows_before_counts_the_offsets_below_the_end(offsets: list[int], end: int) -> None:
    """A task cuts each polled batch (one partition's, offsets ascending, gaps where compaction
    removed records) at its range's end."""
    polled = pa.RecordBatch.from_arrays([pa.array(offsets, pa.int64())], names=["offset"])
    assert source._rows_before(polled, end) == sum(1 for offset in offsets if offset < end)


def test_a_task_reads_its_ranges_in_order_each_exactly() -> None:
    """Ranges of two partitions, one of them in two parts (minPartitions), read one after
    another while the next is fetched ahead: each range's records once, nothing past its end
    (the log goes on beyond each), even where a consumer read ahead past a range's end; and
    once read, no consumer is left fetching."""
    t1 = TopicPartition("t", 1)
    ranges = [OffsetRange("t", 0, 0, 5), OffsetRange("t", 1, 2, 8), OffsetRange("t", 0, 5, 9)]
    with running({"t": 2}) as cluster:
        cluster.append(T0, [b"p0-%d" % i for i in range(12)])
        cluster.append(t1, [b"p1-%d" % i for i in range(12)])
        given = {"bootstrap.servers": cluster.bootstrap, "subscribe": "t"}
        batches = list(source.read_ranges(SourceOptions.parse(given, batch=True), ranges))
        consumers = source._consumers[cluster.bootstrap]
        assert [c.assignment() for c in consumers] == [set(), set()], "still fetching"
    read = [
        (partition, offset, value)
        for batch in batches
        for partition, offset, value in zip(
            *(batch.column(name).to_pylist() for name in ("partition", "offset", "value")),
            strict=True,
        )
    ]
    assert read == [
        *((0, i, b"p0-%d" % i) for i in range(5)),
        *((1, i, b"p1-%d" % i) for i in range(2, 8)),
        *((0, i, b"p0-%d" % i) for i in range(5, 9)),
    ]
