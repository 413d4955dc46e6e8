"""The peers of bench/client.py: Redis Streams, NATS JetStream and RabbitMQ Streams, one node
each and no replication, run by their own scripts in ../shared/bench/peers (W1 produce, W2
consume, W3 latency at a paced rate; that folder's README says what each does). `make
bench-peers` installs the servers and the clients' venv; a peer that is not installed is
skipped with a line that says how to install it."""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS_DIR = ROOT.parent / "shared" / "bench" / "peers"
PEERS_PYTHON = Path("/tmp/peers/venv/bin/python")
# Each peer's script, the server binary it needs, and the arguments that make it one run of
# the workloads only (Redis: without redis-benchmark's own figures).
PEER_RUNS: dict[str, tuple[str, list[str]]] = {
    "Redis Streams": ("redis-server", ["bench_redis.py", "--mode", "default", "--skip-native"]),
    "NATS JetStream": ("nats-server", ["bench_nats.py", "--mode", "default"]),
    "RabbitMQ Streams": ("rabbitmq-server", ["bench_rabbit.py"]),
}
# Where each script stores its W3 result; NATS measures a push and a pull consumer: the push one.
_LATENCY_KEYS = ("W3", "W3_push")
PEER_TIMEOUT_S = 1800


@dataclass(frozen=True)
class PeerFigures:
    produce_rate: float
    consume_rate: float
    latency_p50_ms: float | None
    latency_p99_ms: float | None


def installed(server: str) -> bool:
    """The peer's server binary (Debian puts them in /usr/sbin or /usr/bin) and the venv."""
    found = any(Path(folder, server).exists() for folder in ("/usr/sbin", "/usr/bin"))
    return found and PEERS_PYTHON.exists() and PEERS_DIR.exists()


def run_peer(name: str, records: int, latency_s: float, rate: int) -> PeerFigures | None:
    """One run of W1 and W2 (and W3 at `rate` for `latency_s` unless that is 0) through the
    peer's script; None, with a line saying why, if it is not installed or failed."""
    server, (script, *options) = PEER_RUNS[name]
    if not installed(server):
        print(f"{name}: skipped, not installed (as root: `make bench-peers`)", flush=True)
        return None
    latency = ["--rate", str(rate), "--duration", f"{latency_s:g}"] if latency_s else ["--skip-w3"]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        command = [
            str(PEERS_PYTHON), script, *options, "--runs", "1", "--records", str(records),
            *latency, "--workdir", str(Path(tmp) / "data"), "--out", str(out),
        ]  # fmt: skip
        done = subprocess.run(
            command, cwd=PEERS_DIR, capture_output=True, text=True, timeout=PEER_TIMEOUT_S
        )
        if done.returncode != 0 or not out.exists():
            print(f"{name}: failed ({done.stderr.strip().splitlines()[-1:]})", flush=True)
            return None
        (result,) = json.loads(out.read_text())["runs"]
    w3 = next((result[key] for key in _LATENCY_KEYS if key in result), None)
    figures = PeerFigures(
        result["W1"]["rec_s"],
        result["W2"]["rec_s"],
        w3["p50_ms"] if w3 else None,
        w3["p99_ms"] if w3 else None,
    )
    print(
        f"{name} (1 node, no replication): produce {figures.produce_rate:,.0f} records/s, "
        f"consume {figures.consume_rate:,.0f} records/s"
        + (f", latency p50 {w3['p50_ms']:.1f} ms p99 {w3['p99_ms']:.1f} ms" if w3 else ""),
        flush=True,
    )
    return figures
