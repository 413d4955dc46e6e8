"""`pykraft perf produce` and `pykraft perf consume`: Kafka's kafka-producer-perf-test and
kafka-consumer-perf-test, with the same output lines so existing scripts can parse them.

produce sends N random payloads of S bytes, throttled to R records/s (-1: as fast as possible),
timing every k-th record (LATENCY_SAMPLE_EVERY) from `send` to its acknowledgement while the
producer counts the others per batch, so the bookkeeping costs little beside `send`; every 5 s
it prints a window line and at the end Kafka's summary line (with the 50th, 95th, 99th and
99.9th latency percentiles). consume reads N messages from every partition's beginning and
prints Kafka's header and data line; progress goes to stderr every 5 s. A delivery failure or
a consume timeout prints "Error: CODE: sentence" and exits 1; bad arguments exit 2.

The statistics, formatters and throttle are pure (time comes in as `now_ms`) and unit-tested.
"""

from __future__ import annotations

import operator
import random
import string
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click

from pykraft.cli.options import bootstrap_server_option, properties_option
from pykraft.cli.properties import producer_kwargs
from pykraft.client.clock import monotonic_ms
from pykraft.client.consumer.consumer import Consumer
from pykraft.client.errors import KafkaError, RequestTimedOutError
from pykraft.client.producer.future import FutureRecordMetadata
from pykraft.client.producer.producer import Producer
from pykraft.client.types import ConsumerRecord, TopicPartition

REPORTING_INTERVAL_MS = 5000  # Kafka's default for both tools
# Kafka keeps at most this many latency samples (every k-th record) for the percentiles.
LATENCY_SAMPLES_MAX = 500_000
# Every k-th record's latency is measured, k at least this: a sampled record's callback costs
# about 4 us, four times `send` itself, while the producer counts deliveries per batch for
# nothing. At 16 the samples cost 0.25 us a record, at 64 about 0.06 (`pykraft perf produce`
# of 500,000 records: 1.69 us of client CPU a record at 16, 1.42 at 128, start-up included),
# and 500,000 records still give 7,800 samples for the percentiles.
LATENCY_SAMPLE_EVERY = 64
PERCENTILES = (0.5, 0.95, 0.99, 0.999)
_MB = 1024 * 1024
_THROTTLE_STEP_MS_MAX = 100  # the throttle sleeps in steps so it stays responsive
_POLL_INTERVAL_MS = 200
# Records one poll of `perf consume` takes at most (Kafka's max.poll.records default): taking all
# that is buffered at once empties the consumer's prefetch, so it would wait for every fetch.
CONSUME_POLL_RECORDS_MAX = 500
CONSUMER_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


def percentiles(latencies_ms: Sequence[int], wanted: Sequence[float] = PERCENTILES) -> list[int]:
    """Kafka's nearest-rank-below percentiles: the sorted sample at index int(count * p)."""
    if not latencies_ms:
        return [0 for _ in wanted]
    ordered = sorted(latencies_ms)
    return [ordered[min(int(len(ordered) * p), len(ordered) - 1)] for p in wanted]


def _rates(count: int, size_bytes: int, elapsed_ms: int) -> tuple[float, float]:
    """Records/s and MB/s over `elapsed_ms` (at least 1 ms, so a burst never divides by 0)."""
    seconds = max(elapsed_ms, 1) / 1000
    return count / seconds, size_bytes / _MB / seconds


@dataclass
class _Window:
    """A stretch of time: the records delivered before it began, and the latency samples
    taken in it. The whole run is a window too."""

    start_ms: int
    delivered_before: int = 0
    samples: int = 0
    latency_total_ms: int = 0
    latency_max_ms: int = 0

    def add(self, latency_ms: int) -> None:
        self.samples += 1
        self.latency_total_ms += latency_ms
        self.latency_max_ms = max(self.latency_max_ms, latency_ms)

    def avg_latency_ms(self) -> float:
        return self.latency_total_ms / self.samples if self.samples else 0.0


class ProducerStats:
    """Latency and throughput of a producer run, kept cheaply: the producer counts delivered
    records per batch (`Producer.delivery_counts`), and only every `sample_every`-th record has
    a callback, whose latency stands for its neighbours' (average, maximum and percentiles are
    over these samples). Thread-safe: samples arrive on the producer's sender thread while the
    main thread reads the summary after `flush`."""

    def __init__(
        self,
        num_records: int,
        start_ms: int,
        record_size_bytes: int,
        interval_ms: int = REPORTING_INTERVAL_MS,
    ) -> None:
        self.sample_every = max(LATENCY_SAMPLE_EVERY, -(-num_records // LATENCY_SAMPLES_MAX))
        self._record_size_bytes = record_size_bytes
        self._interval_ms = interval_ms
        self._total = _Window(start_ms)
        self._window = _Window(start_ms)
        self._samples_ms: list[int] = []
        self._lock = threading.Lock()

    def sample(self, latency_ms: int, delivered: int, now_ms: int) -> str | None:
        """Counts one sampled record's latency, `delivered` records being delivered by now;
        returns a progress line when a window closes."""
        assert latency_ms >= 0, latency_ms
        with self._lock:
            self._samples_ms.append(latency_ms)
            self._total.add(latency_ms)
            self._window.add(latency_ms)
            if now_ms - self._window.start_ms < self._interval_ms:
                return None
            line = window_line(self._window, delivered, self._record_size_bytes, now_ms)
            self._window = _Window(now_ms, delivered)
            return line

    def summary(self, delivered: int, now_ms: int) -> str:
        """Kafka's final line over the whole run, `delivered` records in all."""
        with self._lock:
            latencies = percentiles(self._samples_ms)
            return summary_line(self._total, delivered, self._record_size_bytes, latencies, now_ms)


def window_line(window: _Window, delivered: int, record_size_bytes: int, now_ms: int) -> str:
    """Kafka's progress line, e.g. "120 records sent, 24.0 records/sec (0.00 MB/sec), ..."."""
    count = delivered - window.delivered_before
    per_s, mb_per_s = _rates(count, count * record_size_bytes, now_ms - window.start_ms)
    return (
        f"{count} records sent, {per_s:.1f} records/sec ({mb_per_s:.2f} MB/sec), "
        f"{window.avg_latency_ms():.1f} ms avg latency, "
        f"{float(window.latency_max_ms):.1f} ms max latency."
    )


def summary_line(
    total: _Window,
    delivered: int,
    record_size_bytes: int,
    latency_percentiles_ms: Sequence[int],
    now_ms: int,
) -> str:
    """Kafka's summary line; `latency_percentiles_ms` are the 50th, 95th, 99th and 99.9th."""
    p50, p95, p99, p999 = latency_percentiles_ms
    per_s, mb_per_s = _rates(delivered, delivered * record_size_bytes, now_ms - total.start_ms)
    return (
        f"{delivered} records sent, {per_s:f} records/sec ({mb_per_s:.2f} MB/sec), "
        f"{total.avg_latency_ms():.2f} ms avg latency, "
        f"{float(total.latency_max_ms):.2f} ms max latency, "
        f"{p50} ms 50th, {p95} ms 95th, {p99} ms 99th, {p999} ms 99.9th."
    )


@dataclass(frozen=True)
class Throttle:
    """Holds a sender to `records_per_s` on average since `start_ms` (negative: no limit)."""

    records_per_s: float
    start_ms: int

    def wait_ms(self, sent: int, now_ms: int) -> float:
        """How long to pause after `sent` records so the average rate is not above the target."""
        if self.records_per_s <= 0:
            return 0.0
        due_ms = self.start_ms + sent * 1000 / self.records_per_s
        return max(0.0, due_ms - now_ms)

    def pause(self, sent: int, clock: Callable[[], int], sleep: Callable[[float], None]) -> None:
        """Sleeps (in bounded steps, re-reading the clock) until the rate is back on target."""
        while (left_ms := self.wait_ms(sent, clock())) > 0:
            sleep(min(left_ms, _THROTTLE_STEP_MS_MAX) / 1000)


def consumer_line(
    start_wall_ms: int,
    end_wall_ms: int,
    size_bytes: int,
    messages: int,
    rebalance_ms: int,
) -> str:
    """Kafka's consumer data line; fetch time is the elapsed time less the rebalance time."""
    elapsed_s = max(end_wall_ms - start_wall_ms, 1) / 1000
    fetch_ms = max(end_wall_ms - start_wall_ms - rebalance_ms, 0)
    fetch_s = max(fetch_ms, 1) / 1000
    mb = size_bytes / _MB
    return (
        f"{_wall(start_wall_ms)}, {_wall(end_wall_ms)}, {mb:.4f}, {mb / elapsed_s:.4f}, "
        f"{messages}, {messages / elapsed_s:.4f}, {rebalance_ms}, {fetch_ms}, "
        f"{mb / fetch_s:.4f}, {messages / fetch_s:.4f}"
    )


def _wall(wall_ms: int) -> str:
    """Kafka's "yyyy-MM-dd HH:mm:ss:SSS" in local time."""
    moment = datetime.fromtimestamp(wall_ms / 1000)
    return moment.strftime("%Y-%m-%d %H:%M:%S:") + f"{wall_ms % 1000:03d}"


def _wall_ms() -> int:
    return int(time.time() * 1000)


def random_payload(size_bytes: int, rng: random.Random) -> bytes:
    """Kafka's payload: random uppercase ASCII letters."""
    return "".join(rng.choices(string.ascii_uppercase, k=size_bytes)).encode("ascii")


_KEY = operator.attrgetter("key")
_VALUE = operator.attrgetter("value")


def _payload_bytes(records: Sequence[ConsumerRecord]) -> int:
    """The records' key and value bytes, summed in bulk (no Python loop per record)."""
    keys = sum(map(len, filter(None, map(_KEY, records))))
    return keys + sum(map(len, filter(None, map(_VALUE, records))))


@click.group()
def perf() -> None:
    """Measure producer and consumer throughput and latency, like Kafka's perf-test tools."""


@perf.command("produce")
@click.option("--topic", required=True, help="Topic to produce to.")
@click.option("--num-records", required=True, type=click.IntRange(min=1))
@click.option("--record-size", required=True, type=click.IntRange(min=0), help="Bytes a value.")
@click.option("--throughput", required=True, type=float, help="Records/s to aim for; -1: no limit.")
@click.option(
    "--acks", type=click.Choice(["all", "-1", "0", "1"]), default="all", show_default=True
)
@properties_option(
    "--producer-prop",
    "props",
    build=producer_kwargs,
    help="A Kafka producer property (linger.ms, batch.size, ...); overrides --acks. Repeatable.",
)
@bootstrap_server_option
def perf_produce(
    topic: str,
    num_records: int,
    record_size: int,
    throughput: float,
    acks: str,
    props: dict[str, object],
    bootstrap: list[str],
) -> None:
    """Send --num-records random records and report latency and throughput."""
    if throughput == 0:
        raise click.BadParameter(
            "must be positive, or -1 for no limit", param_hint="'--throughput'"
        )
    payload = random_payload(record_size, random.Random())
    kwargs: dict[str, Any] = {"acks": acks, **props}
    try:
        producer = Producer(bootstrap_servers=bootstrap, **kwargs)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    with producer:
        start_ms = monotonic_ms()
        stats = ProducerStats(num_records, start_ms, len(payload))
        sample_every = stats.sample_every
        throttle = Throttle(throughput, start_ms)
        for sent in range(num_records):
            future = producer.send(topic, payload)
            if sent % sample_every == 0:
                future.add_done_callback(_sampler(stats, producer))
            if throughput > 0:
                throttle.pause(sent + 1, monotonic_ms, time.sleep)
        producer.flush()
        counts = producer.delivery_counts()
    if counts.last_error is not None:
        error = counts.last_error
        raise error if isinstance(error, KafkaError) else KafkaError(str(error))
    click.echo(stats.summary(counts.records_delivered, monotonic_ms()))


def _sampler(stats: ProducerStats, producer: Producer) -> Callable[[FutureRecordMetadata], None]:
    """The callback of one sampled record: its latency runs from now to the callback."""
    send_ms = monotonic_ms()

    def on_done(future: FutureRecordMetadata) -> None:
        if future.exception() is not None:
            return  # counted by the producer; the run fails after flush
        now_ms = monotonic_ms()
        delivered = producer.delivery_counts().records_delivered
        line = stats.sample(now_ms - send_ms, delivered, now_ms)
        if line is not None:
            click.echo(line)

    return on_done


@perf.command("consume")
@click.option("--topic", required=True, help="Topic to consume from.")
@click.option("--messages", required=True, type=click.IntRange(min=1), help="How many to read.")
@click.option(
    "--timeout-ms",
    type=click.IntRange(min=1),
    default=10000,
    show_default=True,
    help="Fail when no record arrives for this long.",
)
@bootstrap_server_option
def perf_consume(topic: str, messages: int, timeout_ms: int, bootstrap: list[str]) -> None:
    """Read --messages records from every partition's beginning and report throughput."""
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        start_wall_ms = _wall_ms()
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for(topic)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(partitions)
        count, size_bytes = _consume(consumer, messages, timeout_ms, start_wall_ms)
        end_wall_ms = _wall_ms()
    click.echo(CONSUMER_HEADER)
    # Partitions are assigned, not joined through a group: no rebalance time, as in Kafka.
    click.echo(consumer_line(start_wall_ms, end_wall_ms, size_bytes, count, 0))


def _consume(
    consumer: Consumer, messages: int, timeout_ms: int, start_wall_ms: int
) -> tuple[int, int]:
    """Polls until `messages` records arrived: (count, key and value bytes); progress on
    stderr every reporting interval. RequestTimedOutError if the records stop coming."""
    count, size_bytes = 0, 0
    last_record_ms = last_report_ms = monotonic_ms()
    while count < messages:
        records_max = min(messages - count, CONSUME_POLL_RECORDS_MAX)
        records = consumer.poll(timeout_ms=_POLL_INTERVAL_MS, records_max=records_max)
        now_ms = monotonic_ms()
        if records:
            last_record_ms = now_ms
        elif now_ms - last_record_ms >= timeout_ms:
            raise RequestTimedOutError(
                f"only {count} of {messages} messages arrived: no record for {timeout_ms} ms "
                "(raise --timeout-ms, or produce more)"
            )
        count += len(records)
        size_bytes += _payload_bytes(records)
        if now_ms - last_report_ms >= REPORTING_INTERVAL_MS:
            last_report_ms = now_ms
            click.echo(consumer_line(start_wall_ms, _wall_ms(), size_bytes, count, 0), err=True)
    return count, size_bytes
