"""Benchmark of end-to-end latency (issue 17 §5) and where it goes.

Three controllers and three broker processes on 127.0.0.1, a topic of 6 partitions with
replication factor 3 (min.insync.replicas=2), 100-byte records sent by one paced producer
(`--rate` records/s, linger_ms as given) while a consumer in the same process reads every record
as it arrives. Each value starts with its send time; per record the bench knows its send time,
its acknowledgement time and its receipt time, and prints for acks=1 and then acks=all:

- send -> ack: with acks=1 the leader's append (and the request's round trip), with acks=all
  also the followers' fetch round trips until the high-water mark covers the record;
- ack -> receipt: what the consumer adds after the record is committed (the leader waking its
  parked fetch on the high-water mark's move, the answer's trip, the poll loop);
- send -> receipt: end to end, p50, p99 and max.

The ack and the receipt are taken on different threads of this process, so a receipt may come
just before the ack callback runs (a negative ack -> receipt).

`--code DIR` runs the cluster from another source tree (a `pykraft` package directory inside
DIR, put first on the servers' PYTHONPATH; the client stays this tree's): export main there
(`git archive main | tar -x -C DIR/pykraft`) to take "before" figures in the same conditions.

Run (it starts a cluster): `flock /tmp/pykraft-cluster.lock .venv/bin/python bench/latency.py
[--rate 10000] [--seconds 10] [--linger-ms 0] [--fetch-max-wait-ms 500] [--code DIR]`. Figures
depend on the machine; compare runs taken one after the other.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import ALL_PARTITIONS, LatencyReader, percentile, send_stamped  # noqa: E402
from pykraft.client import FutureRecordMetadata  # noqa: E402
from tests.integration.test_cluster_e2e import TOPIC, bootstrap, three_broker_cluster  # noqa: E402


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


def _summary(name: str, values_ms: list[float]) -> str:
    return (
        f"{name} p50 {percentile(values_ms, 0.5):.1f} ms, p99 {percentile(values_ms, 0.99):.1f} ms,"
        f" max {max(values_ms):.1f} ms"
    )


def one_pass(address: str, acks: str, args: argparse.Namespace) -> None:
    """Sends at the rate with `acks` while reading, and prints the breakdown."""
    reader = LatencyReader(address, ALL_PARTITIONS, fetch_max_wait_ms=args.fetch_max_wait_ms)
    answers = Acks()
    total, reached = send_stamped(
        address,
        TOPIC,
        args.rate,
        args.seconds,
        on_ack=answers.on_ack,
        acks=acks,
        linger_ms=args.linger_ms,
    )
    reader.close(total)
    to_ack_ms, ack_to_receipt_ms, end_to_end_ms = [], [], []
    for key, (sent_ns, received_ns) in reader.arrivals_ns.items():
        end_to_end_ms.append((received_ns - sent_ns) / 1e6)
        acked_ns = answers.at_ns.get(key)
        if acked_ns is not None:
            to_ack_ms.append((acked_ns - sent_ns) / 1e6)
            ack_to_receipt_ms.append((received_ns - acked_ns) / 1e6)
    print(
        f"acks={acks}, linger_ms={args.linger_ms}, fetch_max_wait_ms={args.fetch_max_wait_ms},"
        f" {args.rate} records/s (reached {reached:.0f}/s), {total} records:"
    )
    print("  " + _summary("send -> ack:    ", to_ack_ms))
    print("  " + _summary("ack -> receipt: ", ack_to_receipt_ms))
    print("  " + _summary("send -> receipt:", end_to_end_ms))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--linger-ms", type=int, default=0)
    parser.add_argument("--fetch-max-wait-ms", type=int, default=500)
    parser.add_argument("--code", type=Path, help="a directory holding another pykraft package")
    args = parser.parse_args()
    if args.code is not None:
        os.environ["PYTHONPATH"] = str(args.code.resolve())
        print(f"cluster code: {args.code}")
    with tempfile.TemporaryDirectory() as tmp, three_broker_cluster(Path(tmp)) as cluster:
        address = bootstrap(cluster[1])
        for acks in ("1", "all"):
            one_pass(address, acks, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
