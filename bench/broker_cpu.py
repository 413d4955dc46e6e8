"""Benchmark of the brokers' CPU per record under produce and consume (issue 17 §4), and where
it goes.

Three controllers and three brokers on 127.0.0.1, a topic of 6 partitions with replication
factor 3 (min.insync.replicas=2) per produce profile, 100-byte records from bench/client.py's
producer settings (Kafka's defaults and the tuned ones; acks=all, idempotent), each run in a
process of its own (bench/client_process.py), then one consumer reading the defaults' topic
back. Per run it prints records/s, the CPU the three brokers spent per record (user +
system, from /proc: replication is in it, as every record is written by three brokers) and
their threads' voluntary switches per 1,000 records (each a thread that blocked: a hand-off
between gRPC's threads, a wait woken, the GIL; steadier than CPU on a shared machine).

`--profile DIR` then repeats each run with py-spy sampling every broker's thread that holds the
GIL (`py-spy record --gil --format raw`, one file per broker and run in DIR: the brokers' Python
work, not their waits nor gRPC's C threads; py-spy's own idle filter counted threads that a
notify_all had just woken as busy) and prints the frames most samples were in, by own time and
with callees, summed over the brokers (py-spy slows what it samples, so those runs' rates are
not the figures). py-spy needs ptrace rights over the brokers (root here).

`--code DIR` (bench/source_tree.py; repeatable) runs every run on a fresh cluster of each tree
given, round by round (`--rounds`), so "before" and "after" come from one run: the
controllers, the brokers and the client processes run it.

Run (it starts clusters): `flock /tmp/pykraft-cluster.lock .venv/bin/python bench/broker_cpu.py
[--records 300000] [--rounds 1] [--code DIR ...] [--profile DIR]`.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.client import DEFAULT_PRODUCER, TOPIC_ARGS, TUNED_PRODUCER  # noqa: E402
from bench.client_process import run_in_process  # noqa: E402
from bench.source_tree import SourceTree, add_code_argument, each_tree, trees_of  # noqa: E402
from tests.integration.cluster import create_topic, wait_until_brokers_know  # noqa: E402
from tests.integration.processes import BrokerProcess  # noqa: E402
from tests.integration.test_cluster_e2e import (  # noqa: E402
    PARTITIONS,
    bootstrap,
    three_broker_cluster,
)

PRODUCE_PROFILES = {"defaults": DEFAULT_PRODUCER, "tuned": TUNED_PRODUCER}
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
SAMPLES_PER_S = 200  # py-spy's rate: enough samples for a few seconds' run
FRAMES_SHOWN_MAX = 25
PY_SPY_STOP_S = 30


def broker_cpu_s(broker: BrokerProcess) -> float:
    """The broker process's user + system CPU seconds so far (/proc/PID/stat)."""
    assert broker.process is not None
    stat = Path(f"/proc/{broker.process.pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S  # utime, stime


def broker_switches(broker: BrokerProcess) -> int:
    """The voluntary context switches of every thread of the broker so far
    (/proc/PID/task/*/status); a thread that ended meanwhile is not counted."""
    assert broker.process is not None
    switches = 0
    for task in Path(f"/proc/{broker.process.pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:
            continue  # the thread ended
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                switches += int(line.split()[1])
    return switches


@contextmanager
def sampled(brokers: dict[int, BrokerProcess], out: Path | None, run: str) -> Iterator[None]:
    """py-spy records every broker while the block runs (nothing when `out` is None)."""
    if out is None:
        yield
        return
    spies = []
    for node_id, broker in brokers.items():
        assert broker.process is not None
        command = [
            str(Path(sys.executable).parent / "py-spy"), "record", "--pid",
            str(broker.process.pid), "--rate", str(SAMPLES_PER_S), "--format", "raw",
            "--gil", "-o", str(out / f"{run}-broker{node_id}.txt"),
        ]  # fmt: skip
        spies.append(subprocess.Popen(command, stdout=subprocess.DEVNULL))
    time.sleep(1)  # py-spy attaches before the run starts
    try:
        yield
    finally:
        for spy in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        for spy in spies:
            spy.wait(timeout=PY_SPY_STOP_S)


def top_frames(files: list[Path]) -> tuple[int, list[tuple[str, int]], list[tuple[str, int]]]:
    """From py-spy raw (collapsed) stacks: the samples, and the most sampled frames by own time
    and with callees."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for path in files:
        for line in path.read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            frames = stack.split(";")
            count = int(count_text)
            samples += count
            if frames:
                own[frames[-1]] += count
            for frame in set(frames):
                total[frame] += count
    return samples, own.most_common(FRAMES_SHOWN_MAX), total.most_common(FRAMES_SHOWN_MAX)


def _one_cluster(
    tree: SourceTree, records: int, profile: Path | None
) -> list[tuple[str, float, float, float]]:
    """Each run on a fresh cluster of `tree`: (run, records/s, broker CPU us/record, broker
    thread switches per 1,000 records)."""
    figures = []
    with tempfile.TemporaryDirectory() as tmp, three_broker_cluster(Path(tmp)) as cluster:
        quorum, brokers = cluster
        address = bootstrap(brokers)
        runs = [(f"produce {name}", "produce", f"bench-{name}", settings)
                for name, settings in PRODUCE_PROFILES.items()]  # fmt: skip
        runs.append(("consume defaults", "consume", "bench-defaults", {}))
        for name in PRODUCE_PROFILES:
            create_topic(quorum, f"bench-{name}", PARTITIONS, *TOPIC_ARGS)
            wait_until_brokers_know(brokers, f"bench-{name}", PARTITIONS)
        for run, kind, topic, settings in runs:
            before = sum(broker_cpu_s(b) for b in brokers.values())
            switches_before = sum(broker_switches(b) for b in brokers.values())
            done = run_in_process(
                kind, address, topic, records, settings, extensions=True, tree=tree
            )
            cpu_s = sum(broker_cpu_s(b) for b in brokers.values()) - before
            switches = sum(broker_switches(b) for b in brokers.values()) - switches_before
            figures.append(
                (run, done.rate, cpu_s / done.records * 1e6, switches / done.records * 1000)
            )
            print(f"{tree.label}: {run}: {done.rate:,.0f} records/s, brokers' CPU "
                  f"{figures[-1][2]:.2f} us/record, {figures[-1][3]:.1f} thread switches "
                  "per 1,000 records", flush=True)  # fmt: skip
        if profile is not None:
            for run, kind, topic, settings in runs:
                with sampled(brokers, profile, run.replace(" ", "-")):
                    run_in_process(
                        kind, address, topic, records, settings, extensions=True, tree=tree
                    )
    return figures


def _print_profile(profile: Path) -> None:
    for run in ("produce-defaults", "produce-tuned", "consume-defaults"):
        samples, own, total = top_frames(sorted(profile.glob(f"{run}-broker*.txt")))
        print(f"\n{run}: {samples} samples over the three brokers")
        for title, frames in (("own", own), ("with callees", total)):
            print(f"  by {title}:")
            for frame, count in frames:
                print(f"    {count / samples:6.1%}  {frame}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=1)
    add_code_argument(parser)
    parser.add_argument("--profile", type=Path, help="a directory for py-spy's files")
    args = parser.parse_args()
    trees = trees_of(args)
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for number in range(args.rounds):
        for tree in each_tree(trees, number):
            last = number == args.rounds - 1 and tree == trees[-1]
            for run, rate, cpu, switches in _one_cluster(
                tree, args.records, args.profile if last else None
            ):
                results.setdefault((tree.label, run), []).append((rate, cpu, switches))
    print("\n| tree | run | records/s (median) | brokers' CPU us/record (median) |"
          " thread switches per 1,000 records (median) |")  # fmt: skip
    print("| --- | --- | --- | --- | --- |")
    for (name, run), values in results.items():
        columns = zip(*values, strict=True)
        rate, cpu, switches = (statistics.median(column) for column in columns)
        print(f"| {name} | {run} | {rate:,.0f} | {cpu:.2f} | {switches:.0f} |")
    if args.profile is not None:
        _print_profile(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
