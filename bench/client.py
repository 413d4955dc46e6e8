"""Benchmark of the Python client beside the peers (issue 5 §6), all in one run.

Ours: three controllers and three brokers on 127.0.0.1, a topic of 6 partitions with replication
factor 3 (min.insync.replicas=2), one client process (this one): producer records/s with acks=1
and with acks=all (idempotent, Kafka's default), consumer records/s reading everything back,
and the client's CPU microseconds per record for each (this process's CPU time: the cluster runs
in other processes).

Peers: the same record count through Redis Streams, NATS JetStream and RabbitMQ Streams with
their Python clients, one node each and no replication, run by the scripts in
../shared/bench/peers (W1 produce, W2 consume; see their README for install). They run after our
cluster is stopped, so no run competes with another. A peer that is not installed is skipped
with a line that says so.

Run: `.venv/bin/python bench/client.py [--records 1000000] [--no-peers]`. Figures depend on
the machine; the ratios in the last table are taken in one run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import VALUE_BYTES, consume_run, produce_run  # noqa: E402
from tests.integration.test_cluster_e2e import bootstrap, three_broker_cluster  # noqa: E402

PEERS_DIR = ROOT.parent / "shared" / "bench" / "peers"
PEERS_PYTHON = Path("/tmp/peers/venv/bin/python")
# Each peer script with the arguments that make it one run of W1 and W2 only.
PEER_RUNS: dict[str, list[str]] = {
    "Redis Streams": ["bench_redis.py", "--mode", "default", "--skip-native"],
    "NATS JetStream": ["bench_nats.py", "--mode", "default"],
    "RabbitMQ Streams": ["bench_rabbit.py"],
}
PEER_TIMEOUT_S = 900


@dataclass(frozen=True)
class Figures:
    produce_rate: float
    consume_rate: float


def ours(records: int) -> Figures:
    with tempfile.TemporaryDirectory() as tmp, three_broker_cluster(Path(tmp)) as (_, brokers):
        address = bootstrap(brokers)
        rates: dict[str, float] = {}
        for acks in ("1", "all"):
            run = produce_run(address, acks, records)
            rates[acks] = run.rate
            print(
                f"pykraft producer, acks={acks}, {records} records of {VALUE_BYTES} B, RF 3: "
                f"{run.rate:,.0f} records/s, client CPU {run.cpu_us_per_record:.2f} us/record",
                flush=True,
            )
        run = consume_run(address)
        print(
            f"pykraft consumer, {run.records} records from 6 partitions: {run.rate:,.0f} "
            f"records/s, client CPU {run.cpu_us_per_record:.2f} us/record",
            flush=True,
        )
        return Figures(rates["all"], run.rate)


def peer(name: str, records: int) -> Figures | None:
    """One run of W1 and W2 through the peer's own script; None if it is not installed."""
    if not PEERS_PYTHON.exists() or not PEERS_DIR.exists():
        print(f"{name}: skipped (install as {PEERS_DIR}/README.md says)")
        return None
    script, *options = PEER_RUNS[name]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        command = [
            str(PEERS_PYTHON), script, *options, "--runs", "1", "--records", str(records),
            "--skip-w3", "--workdir", str(Path(tmp) / "data"), "--out", str(out),
        ]  # fmt: skip
        done = subprocess.run(
            command, cwd=PEERS_DIR, capture_output=True, text=True, timeout=PEER_TIMEOUT_S
        )
        if done.returncode != 0 or not out.exists():
            print(f"{name}: failed ({done.stderr.strip().splitlines()[-1:]})")
            return None
        (result,) = json.loads(out.read_text())["runs"]
    figures = Figures(result["W1"]["rec_s"], result["W2"]["rec_s"])
    print(
        f"{name} (1 node, no replication): produce {figures.produce_rate:,.0f} records/s, "
        f"consume {figures.consume_rate:,.0f} records/s",
        flush=True,
    )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--no-peers", action="store_true")
    args = parser.parse_args()
    mine = ours(args.records)
    if args.no_peers:
        return 0
    theirs = {name: peer(name, args.records) for name in PEER_RUNS}
    print("\n| peer | produce records/s | pykraft acks=all / peer | consume records/s | "
          "pykraft / peer |\n|---|---|---|---|---|")  # fmt: skip
    for name, figures in theirs.items():
        if figures is not None:
            print(
                f"| {name} | {figures.produce_rate:,.0f} | "
                f"{mine.produce_rate / figures.produce_rate:.2f} | "
                f"{figures.consume_rate:,.0f} | {mine.consume_rate / figures.consume_rate:.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
