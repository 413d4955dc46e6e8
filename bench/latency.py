"""Benchmark of end-to-end latency (issue 17 §5) and where it goes; the reference latency
figure (`bench/client.py`'s latency row is this bench's `measure`, with acks=all and
GOAL_LINGER_MS).

Three controllers and three broker processes on 127.0.0.1, a topic of 6 partitions with
replication factor 3 (min.insync.replicas=2), 100-byte records sent by one paced producer
(`--rate` records/s) while a consumer with Kafka's default settings (fetch.max.wait.ms 500,
fetch.min.bytes 1) reads every record as it arrives. Producer and consumer run in processes of
their own (`bench/latency_process.py`), apart from each other and from this one. Each value
starts with its send time; per record the bench knows its send, acknowledgement and receipt
times. Passes, one after the other on the same cluster: acks=1 with linger_ms 0 (the leader's
path alone), acks=all with linger_ms 0 (Kafka's latency-tuned producer), acks=all with
GOAL_LINGER_MS 2 and acks=all with Kafka's default linger_ms 5. The goal's figure is the
linger 2 pass: on this 2-core machine a request per record (linger 0) costs the brokers about
135 us of CPU a record against 80 at linger 2, so at 10,000 records/s they use 1.4 of the 2
cores and every hop waits for one (p50 7-9 ms, against about 3 at linger 2); waiting up to 2 ms
for a batch costs less than that queueing. A user tuning for latency picks the linger that
measures best, as this bench shows.

Each pass's line also gives the brokers' CPU seconds over it and the machine's load average at
its start: on 2 shared cores each hop of a record waits for a core, so figures taken under other
load are comparable only within one run. The brokers run with the latency trace on
(`pykraft.broker.latency_trace`; `--no-trace` runs without it, to see what it costs), and the
bench prints p50 and p99 of each step of a record's way per pass (`bench/latency_breakdown.py`):
the client and the request's trip, the leader's append, the follower's fetch answered, its
append, its next fetch, the high-water mark, the produce answer and the ack, the consumer's
fetch answered and the record polled. Steps are taken per record, so the p50s of the steps need
not add up to the end-to-end p50.

Before and after in one run: `--code DIR` (`bench/source_tree.py`), repeated; each tree gets a
cluster of its own, and its brokers, producer and consumer run that tree.

Run (it starts a cluster): `flock /tmp/pykraft-cluster.lock .venv/bin/python bench/latency.py
[--rate 10000] [--seconds 10] [--no-trace] [--code DIR ...]`. Figures depend on the machine;
compare runs taken one after the other.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import percentile  # noqa: E402
from bench.latency_breakdown import RecordTimes, Trace, print_table, stage_ms  # noqa: E402
from bench.latency_process import ConsumerSide, produce_side  # noqa: E402
from bench.source_tree import add_code_argument, each_tree, trees_of  # noqa: E402
from pykraft.broker.latency_trace import ENVIRONMENT_VARIABLE  # noqa: E402
from tests.integration.test_cluster_e2e import (  # noqa: E402
    PARTITIONS,
    TOPIC,
    bootstrap,
    three_broker_cluster,
)

# The producer's linger_ms of the goal's figure (see above).
GOAL_LINGER_MS: Final = 2
# (label, acks, linger_ms) of each pass, in order.
PASSES = (
    ("acks=1, linger 0", "1", 0),
    ("acks=all, linger 0", "all", 0),
    (f"acks=all, linger {GOAL_LINGER_MS}", "all", GOAL_LINGER_MS),
    ("acks=all, linger 5", "all", 5),
)


@dataclass(frozen=True)
class Measured:
    """One pass: each record's times by (partition, offset), the rate reached."""

    records: dict[tuple[int, int], RecordTimes]
    reached: float

    def end_to_end_ms(self) -> list[float]:
        return [(t.received_ns - t.sent_ns) / 1e6 for t in self.records.values()]


def measure(address: str, rate: int, seconds: float, *, acks: str, linger_ms: int) -> Measured:
    """Sends `rate` records/s for `seconds` to TOPIC with `acks` and `linger_ms` from one process
    while a consumer (Kafka's default settings) in another reads them as they arrive; both run
    the pykraft first on this process's PYTHONPATH."""
    with tempfile.TemporaryDirectory() as tmp:
        consumer = ConsumerSide(address, TOPIC, PARTITIONS, int(rate * seconds), Path(tmp) / "in")
        acked_ns, reached = produce_side(
            address, TOPIC, rate, seconds, acks=acks, linger_ms=linger_ms, out=Path(tmp) / "out"
        )
        arrivals_ns = consumer.arrivals_ns()
    records = {
        key: RecordTimes(sent_ns, received_ns, acked_ns.get(key))
        for key, (sent_ns, received_ns) in arrivals_ns.items()
    }
    return Measured(records, reached)


def _cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of the processes `pids` so far (/proc/PID/stat)."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def measure_tree(tmp: Path, args: argparse.Namespace) -> list[Measured]:
    """Every pass on a cluster of its own running the tree `starting_processes` chose, traced
    into `tmp`/trace unless --no-trace (the table is printed after the passes)."""
    trace_dir = tmp / "trace"
    trace_dir.mkdir()
    if not args.no_trace:
        os.environ[ENVIRONMENT_VARIABLE] = str(trace_dir)
    runs: list[Measured] = []
    with three_broker_cluster(tmp) as cluster:
        address = bootstrap(cluster[1])
        pids = [broker.process.pid for broker in cluster[1].values() if broker.process]
        for label, acks, linger_ms in PASSES:
            load = os.getloadavg()[0]
            cpu_before_s = _cpu_s(pids)
            run = measure(address, args.rate, args.seconds, acks=acks, linger_ms=linger_ms)
            runs.append(run)
            latencies = run.end_to_end_ms()
            print(
                f"{label}: {len(latencies)} records at {args.rate}/s (reached"
                f" {run.reached:.0f}/s), end to end p50 {percentile(latencies, 0.5):.1f} ms,"
                f" p99 {percentile(latencies, 0.99):.1f} ms, max {max(latencies):.1f} ms;"
                f" brokers' CPU {_cpu_s(pids) - cpu_before_s:.1f} s, load average {load:.1f}",
                flush=True,
            )
        for broker in cluster[1].values():
            broker.stop()  # a clean exit writes its trace
    os.environ.pop(ENVIRONMENT_VARIABLE, None)
    trace = Trace.read(trace_dir)  # written by the brokers as they stopped
    print_table(
        [label for label, _, _ in PASSES], [stage_ms(trace, TOPIC, r.records) for r in runs]
    )
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--no-trace", action="store_true", help="brokers without the trace")
    add_code_argument(parser)
    args = parser.parse_args()
    for _ in each_tree(trees_of(args)):
        with tempfile.TemporaryDirectory() as tmp:
            measure_tree(Path(tmp), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
