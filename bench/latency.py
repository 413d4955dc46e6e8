"""Benchmark of end-to-end latency (issue 17 §5) and where it goes; the reference latency
figure (`bench/client.py`'s latency row is this bench's `measure`).

Three controllers and three broker processes on 127.0.0.1, a topic of 6 partitions with
replication factor 3 (min.insync.replicas=2), 100-byte records sent by one paced producer
(`--rate` records/s) while a consumer in the same process reads every record as it arrives.
Each value starts with its send time; per record the bench knows its send, acknowledgement and
receipt times. Passes, one after the other on the same cluster: acks=1 with linger_ms 0 (the
leader's path alone), acks=all with linger_ms 0 (Kafka's latency-tuned producer: the figure the
issue's goal is measured with) and acks=all with Kafka's default linger_ms 5.

The brokers run with the latency trace on (`pykraft.broker.latency_trace`; `--no-trace` runs
without it, to see what it costs), and the bench prints p50 and p99 of each step of a record's
way per pass (`bench/latency_breakdown.py`): the client and the request's trip, the leader's
append, the follower's fetch answered, its append, its next fetch, the high-water mark, the
produce answer and the ack, the consumer's fetch answered and the record polled. Steps are
taken per record, so the p50s of the steps need not add up to the end-to-end p50.

Before and after in the same conditions: export a commit (`git archive REV | tar -x -C
DIR/pykraft`, with the compiled extensions copied in) and run this bench with
`PYTHONPATH=DIR`: client and servers then run that tree (the bench prints which).

Run (it starts a cluster): `flock /tmp/pykraft-cluster.lock .venv/bin/python bench/latency.py
[--rate 10000] [--seconds 10] [--no-trace]`. Figures depend on the machine; compare runs taken
one after the other.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pykraft  # noqa: E402
from bench.cluster import ALL_PARTITIONS, LatencyReader, percentile, send_stamped  # noqa: E402
from bench.latency_breakdown import RecordTimes, Trace, print_table, stage_ms  # noqa: E402
from pykraft.broker.latency_trace import ENVIRONMENT_VARIABLE  # noqa: E402
from pykraft.client import FutureRecordMetadata  # noqa: E402
from tests.integration.test_cluster_e2e import TOPIC, bootstrap, three_broker_cluster  # noqa: E402

# (label, acks, linger_ms) of each pass, in order.
PASSES = (
    ("acks=1, linger 0", "1", 0),
    ("acks=all, linger 0", "all", 0),
    ("acks=all, linger 5", "all", 5),
)


class Acks:
    """Acknowledgement times ((partition, offset) -> perf_counter_ns), taken on the producer's
    callback thread."""

    def __init__(self) -> None:
        self.at_ns: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()

    def on_ack(self, future: FutureRecordMetadata) -> None:
        now_ns = time.perf_counter_ns()
        if future.exception(timeout=0) is not None:
            return
        metadata = future.result(timeout=0)
        with self._lock:
            self.at_ns[metadata.partition, metadata.offset] = now_ns


@dataclass(frozen=True)
class Measured:
    """One pass: each record's times by (partition, offset), the rate reached."""

    records: dict[tuple[int, int], RecordTimes]
    reached: float

    def end_to_end_ms(self) -> list[float]:
        return [(t.received_ns - t.sent_ns) / 1e6 for t in self.records.values()]


def measure(address: str, rate: int, seconds: float, *, acks: str, linger_ms: int) -> Measured:
    """Sends `rate` records/s for `seconds` to TOPIC with `acks` and `linger_ms` while a
    consumer (Kafka's default settings) reads them as they arrive."""
    reader = LatencyReader(address, ALL_PARTITIONS)
    answers = Acks()
    total, reached = send_stamped(
        address, TOPIC, rate, seconds, on_ack=answers.on_ack, acks=acks, linger_ms=linger_ms
    )
    reader.close(total)
    records = {
        key: RecordTimes(sent_ns, received_ns, answers.at_ns.get(key))
        for key, (sent_ns, received_ns) in reader.arrivals_ns.items()
    }
    return Measured(records, reached)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--no-trace", action="store_true", help="brokers without the trace")
    args = parser.parse_args()
    print(f"pykraft from {pykraft.__path__}")
    with tempfile.TemporaryDirectory() as tmp:
        trace_dir = Path(tmp) / "trace"
        trace_dir.mkdir()
        if not args.no_trace:
            os.environ[ENVIRONMENT_VARIABLE] = str(trace_dir)
        runs: list[Measured] = []
        with three_broker_cluster(Path(tmp)) as cluster:
            address = bootstrap(cluster[1])
            for label, acks, linger_ms in PASSES:
                run = measure(address, args.rate, args.seconds, acks=acks, linger_ms=linger_ms)
                runs.append(run)
                latencies = run.end_to_end_ms()
                print(
                    f"{label}: {len(latencies)} records at {args.rate}/s (reached"
                    f" {run.reached:.0f}/s), end to end p50 {percentile(latencies, 0.5):.1f} ms,"
                    f" p99 {percentile(latencies, 0.99):.1f} ms, max {max(latencies):.1f} ms",
                    flush=True,
                )
            for broker in cluster[1].values():
                broker.stop()  # a clean exit writes its trace
        trace = Trace.read(trace_dir)  # written by the brokers as they stopped
        print_table(
            [label for label, _, _ in PASSES], [stage_ms(trace, TOPIC, r.records) for r in runs]
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
