"""The pure parts of `pykraft perf`: Kafka-format lines, percentiles, throttle math, props."""

from __future__ import annotations

import random
import re

import pytest
from click.testing import CliRunner

from pykraft.cli.main import cli
from pykraft.cli.perf import (
    CONSUMER_HEADER,
    ProducerStats,
    Throttle,
    consumer_line,
    percentiles,
    random_payload,
)

SUMMARY = re.compile(
    r"^\d+ records sent, \d+\.\d{6} records/sec \(\d+\.\d{2} MB/sec\), "
    r"\d+\.\d{2} ms avg latency, \d+\.\d{2} ms max latency, "
    r"\d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$"
)


def test_percentiles_take_the_sorted_sample_at_count_times_p() -> None:
    latencies = list(range(1000, 0, -1))  # 1..1000 ms, unsorted
    assert percentiles(latencies) == [501, 951, 991, 1000]
    assert percentiles([7]) == [7, 7, 7, 7]
    assert percentiles([]) == [0, 0, 0, 0]


def test_summary_line_matches_kafkas_format_exactly() -> None:
    stats = ProducerStats(num_records=4, start_ms=0, record_size_bytes=1024 * 1024)
    for delivered, latency_ms in enumerate((1, 2, 3, 10), start=1):
        assert stats.sample(latency_ms, delivered, now_ms=1000) is None
    line = stats.summary(delivered=4, now_ms=2000)
    assert line == (
        "4 records sent, 2.000000 records/sec (2.00 MB/sec), 4.00 ms avg latency, "
        "10.00 ms max latency, 3 ms 50th, 10 ms 95th, 10 ms 99th, 10 ms 99.9th."
    )
    assert SUMMARY.match(line)


def test_a_window_line_is_returned_once_the_reporting_interval_has_passed() -> None:
    """Samples carry the latency; the count is what the producer delivered meanwhile."""
    stats = ProducerStats(num_records=10, start_ms=0, record_size_bytes=100, interval_ms=5000)
    assert stats.sample(4, delivered=1, now_ms=4999) is None
    line = stats.sample(6, delivered=2, now_ms=5000)
    assert line == (
        "2 records sent, 0.4 records/sec (0.00 MB/sec), 5.0 ms avg latency, 6.0 ms max latency."
    )
    assert stats.sample(2, delivered=3, now_ms=5001) is None  # a new window began at 5000
    later = stats.sample(8, delivered=30, now_ms=10000)
    assert later is not None and later.startswith("28 records sent, 5.6 records/sec")
    assert stats.summary(delivered=30, now_ms=10000).startswith(
        "30 records sent, 3.000000 records/sec"
    )


def test_a_sample_stands_for_at_least_sixty_four_records_and_samples_stay_bounded() -> None:
    assert ProducerStats(num_records=10, start_ms=0, record_size_bytes=1).sample_every == 64
    huge = ProducerStats(num_records=100_000_001, start_ms=0, record_size_bytes=1)
    assert huge.sample_every == 201  # at most LATENCY_SAMPLES_MAX samples


def test_throttle_waits_until_the_average_rate_is_back_on_target() -> None:
    throttle = Throttle(records_per_s=100, start_ms=1000)
    assert throttle.wait_ms(sent=10, now_ms=1100) == 0  # exactly on target
    assert throttle.wait_ms(sent=50, now_ms=1100) == 400  # 50 records are due at 1500
    assert Throttle(records_per_s=-1, start_ms=0).wait_ms(sent=10**9, now_ms=0) == 0


def test_throttle_pause_sleeps_in_bounded_steps_on_an_injected_clock() -> None:
    now = [0.0]
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        now[0] += seconds * 1000

    Throttle(records_per_s=10, start_ms=0).pause(sent=3, clock=lambda: int(now[0]), sleep=sleep)
    assert now[0] >= 300
    assert naps and max(naps) <= 0.1


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--throughput", "-1", "--producer-prop", "bogus.key=1"), "bogus.key"),
        (("--throughput", "0"), "--throughput"),
    ],
)
def test_bad_perf_produce_arguments_are_usage_errors_naming_them(
    args: tuple[str, ...], named: str
) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
            *args, "--bootstrap-server", "127.0.0.1:1",
        ],
    )  # fmt: skip
    assert result.exit_code == 2
    assert named in result.output


def test_consumer_line_has_kafkas_columns_and_number_formats() -> None:
    line = consumer_line(
        start_wall_ms=0, end_wall_ms=2000, size_bytes=2 * 1024 * 1024, messages=500,
        rebalance_ms=0,
    )  # fmt: skip
    fields = line.split(", ")
    assert len(fields) == len(CONSUMER_HEADER.split(", ")) == 10
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:000", fields[0])
    assert fields[2:] == ["2.0000", "1.0000", "500", "250.0000", "0", "2000", "1.0000", "250.0000"]


def test_random_payload_is_uppercase_letters_of_the_asked_size() -> None:
    payload = random_payload(64, random.Random(1))
    assert len(payload) == 64 and payload.isalpha() and payload.isupper()
