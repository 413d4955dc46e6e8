"""Benchmark of the data plane: three controllers and three broker processes on 127.0.0.1, a topic
with 6 partitions and replication factor 3 (min.insync.replicas=2), the real client.

Prints:
- producer throughput with acks=1 and acks=all, N records of 100 bytes each (no key: the sticky
  partitioner fills one batch at a time, as in Kafka);
- consumer throughput: one consumer assigned every partition reading all 2N records back;
- the time from kill -9 of a partition leader to the first acknowledged acks=all write on each of
  its partitions. The controller fences a killed broker when its session stream ends, without
  waiting for broker.session.timeout.ms (`bench/failover.py` breaks this time down).

End-to-end latency is `bench/latency.py`'s (the one reference; `LatencyReader` and
`send_stamped` here are its tools and `bench/follower_fetch_latency.py`'s).

Run: `.venv/bin/python bench/cluster.py [--records 1000000]`.
Figures depend on the machine; compare ratios taken in one run.
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pykraft.client import Consumer, FutureRecordMetadata, Producer, TopicPartition  # noqa: E402
from tests.integration.controllers import Quorum  # noqa: E402
from tests.integration.processes import BrokerProcess, wait_for  # noqa: E402
from tests.integration.test_cluster_e2e import (  # noqa: E402
    PARTITIONS,
    TOPIC,
    bootstrap,
    full_isr,
    registrations,
    three_broker_cluster,
)

VALUE_BYTES = 100
CONSUME_TIMEOUT_S = 600
# The send time (perf_counter_ns) heads each latency value; the rest is padding.
STAMP = struct.Struct(">q")
ALL_PARTITIONS = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]


@dataclass(frozen=True)
class Run:
    """One throughput run: records moved, wall seconds, and this process's CPU seconds (the
    client's: the cluster runs in other processes)."""

    records: int
    seconds: float
    cpu_s: float

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def cpu_us_per_record(self) -> float:
        return self.cpu_s / self.records * 1e6


def _cpu_s() -> float:
    """This process's user + system CPU seconds (finer than os.times' 10 ms ticks)."""
    return time.process_time()


def produce_run(address: str, records: int, settings: Mapping[str, Any], topic: str = TOPIC) -> Run:
    """`records` values of VALUE_BYTES to `topic` through a Producer made with `settings`, from
    the first send to the last ack (one send before that warms metadata and connections)."""
    value = b"x" * VALUE_BYTES
    with Producer(bootstrap_servers=address, **settings) as producer:
        producer.send(topic, value).result(timeout=30)
        started, cpu_started = time.perf_counter(), _cpu_s()
        futures = [producer.send(topic, value) for _ in range(records)]
        producer.flush(timeout=600)
        run = Run(records, time.perf_counter() - started, _cpu_s() - cpu_started)
    failed = sum(1 for future in futures if future.exception(timeout=0) is not None)
    assert not failed, f"{failed} sends failed"
    return run


def consume_run(address: str, settings: Mapping[str, Any] | None = None, topic: str = TOPIC) -> Run:
    """Reads all of `topic` from the beginning through a Consumer made with `settings`."""
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with Consumer(
        bootstrap_servers=address, auto_offset_reset="earliest", **(settings or {})
    ) as consumer:
        consumer.assign(partitions)
        consumer.seek_to_beginning(partitions)
        total = sum(consumer.end_offsets(partitions).values())
        count = 0
        started, cpu_started = time.perf_counter(), _cpu_s()
        deadline = started + CONSUME_TIMEOUT_S
        while count < total:  # the consumer loop a user writes: poll, poll, poll
            assert time.perf_counter() < deadline, f"{count} of {total} consumed in time"
            count += len(consumer.poll(500))
        return Run(count, time.perf_counter() - started, _cpu_s() - cpu_started)


class LatencyReader:
    """A consumer of `partitions` from their current end, reading on a thread of its own: the
    latency (ms) of each record, from the send time heading its value to its receipt, and its
    send and receipt times ((partition, offset) -> perf_counter_ns of each)."""

    def __init__(self, address: str, partitions: list[TopicPartition], **settings: Any) -> None:
        self.latencies: list[float] = []
        self.arrivals_ns: dict[tuple[int, int], tuple[int, int]] = {}
        self._consumer = Consumer(bootstrap_servers=address, **settings)
        self._consumer.assign(partitions)
        self._consumer.seek_to_end(partitions)
        for tp in partitions:
            self._consumer.position(tp)  # resolve the end now, before anything new is sent
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            for record in self._consumer.poll(100):
                (sent_ns,) = STAMP.unpack_from(record.value or b"")
                received_ns = time.perf_counter_ns()
                self.arrivals_ns[record.partition, record.offset] = sent_ns, received_ns
                self.latencies.append((received_ns - sent_ns) / 1e6)

    def close(self, total: int) -> list[float]:
        """Waits until `total` records were read, stops; their latencies."""
        wait_for(lambda: len(self.latencies) >= total, timeout_s=60, what="latency records read")
        self._stop.set()
        self._thread.join(timeout=10)
        self._consumer.close()
        return self.latencies


def send_stamped(
    address: str,
    topic: str,
    rate: int,
    seconds: float,
    *,
    on_ack: Callable[[FutureRecordMetadata], None] | None = None,
    **settings: Any,
) -> tuple[int, float]:
    """Sends `rate` * `seconds` records of VALUE_BYTES at `rate`/s (acks=all and linger_ms=0
    unless `settings` say otherwise), each headed by its send time, calling `on_ack` on each
    answer; (records sent, rate reached)."""
    total = int(rate * seconds)
    padding = b"p" * (VALUE_BYTES - STAMP.size)
    settings = {"acks": "all", "linger_ms": 0, **settings}
    with Producer(bootstrap_servers=address, **settings) as producer:
        started = time.perf_counter()
        for i in range(total):
            ahead_s = started + i / rate - time.perf_counter()
            if ahead_s > 0:
                time.sleep(ahead_s)
            future = producer.send(topic, STAMP.pack(time.perf_counter_ns()) + padding)
            if on_ack is not None:
                future.add_done_callback(on_ack)
        reached = total / (time.perf_counter() - started)
    return total, reached


def failover_ms(quorum: Quorum, brokers: dict[int, BrokerProcess]) -> list[float]:
    """kill -9 of partition 0's leader; ms until the first acks=all write is acknowledged on each
    partition it led. The broker is restarted and back in every ISR before returning."""
    led = registrations(quorum)
    victim = led[0].leader
    partitions = [p for p, r in led.items() if r.leader == victim]
    with Producer(
        bootstrap_servers=bootstrap(brokers), acks="all", linger_ms=0, request_timeout_ms=5000
    ) as producer:
        for p in partitions:
            producer.send(TOPIC, b"warm", partition=p).result(timeout=30)
        brokers[victim].kill()
        killed = time.perf_counter()
        acked: dict[int, float] = {}

        def first_ack(p: int) -> None:
            producer.send(TOPIC, b"after-kill", partition=p).result(timeout=60)
            acked[p] = (time.perf_counter() - killed) * 1000

        threads = [threading.Thread(target=first_ack, args=(p,)) for p in partitions]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=90)
    brokers[victim].start()
    wait_for(lambda: full_isr(quorum), timeout_s=60, what="the killed broker back in every ISR")
    assert len(acked) == len(partitions), "a partition never took a write after the kill"
    return [acked[p] for p in partitions]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(quorum: Quorum, brokers: dict[int, BrokerProcess], args: argparse.Namespace) -> None:
    address = bootstrap(brokers)
    for acks in ("1", "all"):
        settings = {"acks": acks, "linger_ms": 5, "batch_size": 65536}
        run = produce_run(address, args.records, settings)
        print(
            f"producer, acks={acks}, {args.records} records of {VALUE_BYTES} B: "
            f"{run.rate:.0f} records/s, {run.rate * VALUE_BYTES / 1e6:.1f} MB/s, "
            f"client CPU {run.cpu_us_per_record:.1f} us/record"
        )
    run = consume_run(address)
    print(
        f"consumer, all {PARTITIONS} partitions from the beginning, {run.records} records: "
        f"{run.rate:.0f} records/s, {run.rate * VALUE_BYTES / 1e6:.1f} MB/s, "
        f"client CPU {run.cpu_us_per_record:.1f} us/record"
    )
    times = [t for _ in range(args.failovers) for t in failover_ms(quorum, brokers)]
    print(
        f"kill -9 of a leader until the first acknowledged write on its partitions, "
        f"{len(times)} partitions over {args.failovers} kills: median "
        f"{statistics.median(times):.0f} ms, max {max(times):.0f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--failovers", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, three_broker_cluster(Path(tmp)) as cluster:
        report(*cluster, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
