"""Benchmark of the Python client beside the peers (issue 17 §7), all in one run.

Ours: three controllers and three brokers on 127.0.0.1, topics of 6 partitions with replication
factor 3 (min.insync.replicas=2), produce with acks=all and idempotence, in this order:
- the library, each run a process of its own (bench/client_process.py) so its client CPU is its
  own, with Kafka's default client settings and with tuned ones (DEFAULT_*, TUNED_* below), each
  with pykraft's compiled extensions and with PYKRAFT_NO_EXTENSIONS=1, alternating;
- `pykraft perf produce` and `pykraft perf consume` run as a user runs them (their printed
  records/s; CPU of the whole command, start-up included);
- consume of a topic the library produced, the same four ways, then the perf consume (with
  Kafka's default settings only: `perf consume` takes no consumer properties);
- `--code DIR` (bench/source_tree.py; repeatable) makes the library's runs once per tree given
  (`--code . --code DIR`: this tree's client and another's, "before" figures in the same run);
  the library's client processes run the tree, the cluster and the perf runs this tree;
  `--produce-only` runs only the library's produce runs;
- `--rounds N` runs all of the above N times over (the library's four runs in reverse order
  every other round) and keeps each one's median;
- first of all, on the fresh cluster: end-to-end latency at a paced 10,000 records/s with acks=all
  and the goal's linger (`bench/latency.py`'s `measure` and GOAL_LINGER_MS: the reference figure;
  taken after the throughput runs it came out 2-3x higher: their topics' 36 partitions are in
  every follower fetch, and their records in the brokers' logs and heaps).

Peers: the same record count through Redis Streams, NATS JetStream and RabbitMQ Streams, one
node each and no replication (bench/peers.py), right after our cluster is stopped, so no run
competes with another. The last table puts each of our figures beside each peer's as a ratio.

Run (where clusters share the machine, under `flock /tmp/pykraft-cluster.lock`):
`.venv/bin/python bench/client.py [--records 1000000] [--rounds 1] [--latency-seconds 10]
[--no-peers] [--code DIR ...] [--produce-only]`.
Figures depend on the machine; the ratios in the last table are taken in one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.client_process import run_in_process  # noqa: E402
from bench.cluster import VALUE_BYTES, percentile  # noqa: E402
from bench.latency import GOAL_LINGER_MS, measure  # noqa: E402
from bench.peers import PEER_RUNS, PeerFigures, run_peer  # noqa: E402
from bench.perf_cli_runs import perf_consume, perf_produce  # noqa: E402
from bench.source_tree import SourceTree, add_code_argument, trees_of  # noqa: E402
from tests.integration.cluster import create_topic, wait_until_brokers_know  # noqa: E402
from tests.integration.controllers import Quorum  # noqa: E402
from tests.integration.processes import BrokerProcess  # noqa: E402
from tests.integration.test_cluster_e2e import (  # noqa: E402
    PARTITIONS,
    bootstrap,
    three_broker_cluster,
)

# Kafka's producer defaults, spelled out (they are pykraft's defaults too).
DEFAULT_PRODUCER: dict[str, Any] = {
    "acks": "all", "enable_idempotence": True, "batch_size": 16384, "linger_ms": 5,
}  # fmt: skip
TUNED_PRODUCER: dict[str, Any] = {**DEFAULT_PRODUCER, "batch_size": 262144, "linger_ms": 10}
DEFAULT_CONSUMER: dict[str, Any] = {}  # Kafka's: 1 MiB a partition a fetch, 500 records a poll
# 4 MiB a partition a fetch. Measured on 1M records (3 rounds, alternating): no fetch setting
# beat the defaults (this one ties them), and more records a poll cost more client CPU a record
# (max_poll_records 2000: 1.55 us, 10000: 1.75 us, against 1.31 us at 500), so it stays at 500.
TUNED_CONSUMER: dict[str, Any] = {"max_partition_fetch_bytes": 4194304}
# The same settings as `pykraft perf produce --producer-prop` takes them.
PERF_PROPS: dict[str, dict[str, str]] = {
    "defaults": {},
    "tuned": {"batch.size": "262144", "linger.ms": "10"},
}
PROFILES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "defaults": (DEFAULT_PRODUCER, DEFAULT_CONSUMER),
    "tuned": (TUNED_PRODUCER, TUNED_CONSUMER),
}
TOPIC_ARGS = ("--config", "min.insync.replicas=2")
LATENCY_RATE = 10_000  # records/s, the peers' W3 rate


@dataclass(frozen=True)
class Figure:
    """One of our measurements: which way (produce or consume), how, records/s, client CPU."""

    direction: str
    how: str
    rate: float
    cpu_us_per_record: float


def _topic(how: str) -> str:
    """A topic name for the run `how`: what Kafka allows in one, the rest dropped or a dash."""
    dashed = how.replace(" ", "-").replace("/", "-")
    return "bench-" + "".join(c for c in dashed if c.isascii() and (c.isalnum() or c in "._-"))


def _library_runs(trees: list[SourceTree]) -> list[tuple[str, bool, SourceTree]]:
    """The library's runs: (profile, extensions, the client's tree)."""
    return [
        (profile, extensions, tree)
        for profile in PROFILES
        for tree in trees
        for extensions in (True, False)
    ]


def _library_how(profile: str, extensions: bool, tree: SourceTree) -> str:
    how = f"library, {profile}, " + ("extensions" if extensions else "no extensions")
    return how if tree.is_this_tree else f"{how}, {tree.label}"


def _library_topics(trees: list[SourceTree]) -> list[str]:
    """The library's produce runs' topics, one each (the order of _library's runs)."""
    return [_topic(_library_how(*run)) for run in _library_runs(trees)]


def _record(figures: list[Figure], figure: Figure) -> None:
    figures.append(figure)
    print(
        f"pykraft {figure.direction}, {figure.how}: {figure.rate:,.0f} records/s, "
        f"client CPU {figure.cpu_us_per_record:.2f} us/record",
        flush=True,
    )


def _library(
    figures: list[Figure],
    address: str,
    kind: str,
    records: int,
    *,
    reverse: bool,
    trees: list[SourceTree],
) -> None:
    """The library `kind` runs: each profile with extensions, then without, with each tree's
    client in turn; all of them in the opposite order when `reverse` (every other round, so
    that order effects cancel out)."""
    runs = _library_runs(trees)
    first_topic = _library_topics(trees)[0]
    for profile, extensions, tree in reversed(runs) if reverse else runs:
        producer, consumer = PROFILES[profile]
        how = _library_how(profile, extensions, tree)
        topic = _topic(how) if kind == "produce" else first_topic
        settings: Mapping[str, Any] = producer if kind == "produce" else consumer
        run = run_in_process(
            kind, address, topic, records, settings, extensions=extensions, tree=tree
        )
        _record(figures, Figure(kind, how, run.rate, run.cpu_us_per_record))


def _one_round(address: str, args: argparse.Namespace, *, reverse: bool) -> list[Figure]:
    """Each of our throughput measurements once, in the order the module docstring gives (the
    library's reversed when `reverse`). A produce run appends `args.records` to its own topic;
    consume runs read all of the first library topic, the perf consume `args.records` of the
    perf topic."""
    figures: list[Figure] = []
    records, trees = args.records, trees_of(args)
    _library(figures, address, "produce", records, reverse=reverse, trees=trees)
    if args.produce_only:
        return figures
    for profile, props in PERF_PROPS.items():
        run = perf_produce(address, _topic(f"perf {profile}"), records, VALUE_BYTES, props)
        how = f"pykraft perf, {profile}"
        _record(figures, Figure("produce", how, run.rate, run.cpu_us_per_record))
    _library(figures, address, "consume", records, reverse=reverse, trees=trees)
    run = perf_consume(address, _topic("perf defaults"), records)
    _record(figures, Figure("consume", "pykraft perf, defaults", run.rate, run.cpu_us_per_record))
    return figures


def _medians(rounds: list[list[Figure]]) -> list[Figure]:
    """Each measurement's median rate and CPU over the rounds, in the first round's order."""
    same: dict[tuple[str, str], list[Figure]] = {}
    for figure in (figure for figures in rounds for figure in figures):
        same.setdefault((figure.direction, figure.how), []).append(figure)
    return [
        Figure(
            direction,
            how,
            statistics.median(f.rate for f in runs),
            statistics.median(f.cpu_us_per_record for f in runs),
        )
        for (direction, how), runs in same.items()
    ]


def ours(
    quorum: Quorum, brokers: dict[int, BrokerProcess], args: argparse.Namespace
) -> tuple[list[Figure], list[float]]:
    """The latency run on the fresh cluster, then every throughput measurement of ours,
    `args.rounds` times over (the medians); (figures, latencies in ms)."""
    address = bootstrap(brokers)
    latencies = _latency_ms(address, args.latency_seconds) if args.latency_seconds else []
    perf_topics = [_topic(f"perf {profile}") for profile in PERF_PROPS]
    for topic in [*_library_topics(trees_of(args)), *perf_topics]:
        create_topic(quorum, topic, PARTITIONS, *TOPIC_ARGS)
        wait_until_brokers_know(brokers, topic, PARTITIONS)
    rounds = []
    for number in range(1, args.rounds + 1):
        print(f"-- round {number} of {args.rounds}", flush=True)
        rounds.append(_one_round(address, args, reverse=number % 2 == 0))
    return _medians(rounds), latencies


def _latency_ms(address: str, seconds: float) -> list[float]:
    run = measure(address, LATENCY_RATE, seconds, acks="all", linger_ms=GOAL_LINGER_MS)
    latencies = run.end_to_end_ms()
    print(
        f"pykraft end-to-end latency at {LATENCY_RATE:,} records/s (reached {run.reached:,.0f}/s) "
        f"for {seconds:g} s, acks=all, linger_ms={GOAL_LINGER_MS}: p50 "
        f"{percentile(latencies, 0.5):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms",
        flush=True,
    )
    return latencies


def print_table(
    figures: list[Figure], latencies: list[float], peers: dict[str, PeerFigures]
) -> None:
    """Each of our figures and its ratio to each peer's (above 1: pykraft is ahead)."""
    _row(
        "pykraft (3 brokers, RF 3, acks=all)", "records/s", "client CPU us/record",
        *(f"pykraft / {name}" for name in peers),
    )  # fmt: skip
    _row(*["---"] * (3 + len(peers)))
    for figure in figures:
        ratios = [
            figure.rate
            / (peer.produce_rate if figure.direction == "produce" else peer.consume_rate)
            for peer in peers.values()
        ]
        _row(
            f"{figure.direction}, {figure.how}", f"{figure.rate:,.0f}",
            f"{figure.cpu_us_per_record:.2f}", *(f"{ratio:.2f}" for ratio in ratios),
        )  # fmt: skip
    for label, fraction in (("p50", 0.5), ("p99", 0.99)) if latencies else ():
        ours_ms = percentile(latencies, fraction)
        theirs = [getattr(peer, f"latency_{label}_ms") for peer in peers.values()]
        _row(
            f"latency {label} ms at {LATENCY_RATE:,}/s (ratio: peer / pykraft)", f"{ours_ms:.1f}",
            "", *(f"{t / ours_ms:.2g}" if t is not None else "-" for t in theirs),
        )  # fmt: skip
    if not peers:
        return
    print()
    _row(
        "peer (1 node, no replication)",
        "produce records/s",
        "consume records/s",
        "p50 ms",
        "p99 ms",
    )
    _row(*["---"] * 5)
    for name, peer in peers.items():
        _row(
            name, f"{peer.produce_rate:,.0f}", f"{peer.consume_rate:,.0f}",
            _ms(peer.latency_p50_ms), _ms(peer.latency_p99_ms),
        )  # fmt: skip


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _row(*cells: str) -> None:
    print("| " + " | ".join(cells) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--latency-seconds", type=float, default=10.0, help="0: no latency")
    parser.add_argument("--rounds", type=int, default=1, help="each measurement's repeats")
    parser.add_argument("--no-peers", action="store_true")
    add_code_argument(parser)
    parser.add_argument("--produce-only", action="store_true", help="the library's produce runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, three_broker_cluster(Path(tmp)) as cluster:
        figures, latencies = ours(*cluster, args)
    peer_names = [] if args.no_peers else list(PEER_RUNS)
    theirs = {
        name: run_peer(name, args.records, args.latency_seconds, LATENCY_RATE)
        for name in peer_names
    }
    print()
    print_table(figures, latencies, {n: f for n, f in theirs.items() if f is not None})
    return 0


if __name__ == "__main__":
    sys.exit(main())
