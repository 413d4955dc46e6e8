"""Producer pipelining and the perf tools (issue 17 §1), before against after in one run.

One 3 + 3 cluster (three controllers, three brokers, TOPIC with 6 partitions, RF 3,
min.insync.replicas=2) serves both trees: `--before` (a git ref, default `main`, exported with
`git archive`) and this checkout. Each round runs, for each tree in turn, each workload in a
process of its own that imports pykraft from that tree:

- `send defaults`: a plain `send` loop with Kafka's defaults (batch.size 16384, linger.ms 5,
  acks=all, idempotence on), then `flush`;
- `send batch 64k`: the same with batch.size 65536;
- `perf produce`: `pykraft perf produce --throughput -1` with its defaults; its records/s;
- `perf consume`: `pykraft perf consume` of that many records; its nMsg.sec;
- `poll loop`: the library's own consumer loop over as many records, for `perf consume` to be
  set against.

Rounds alternate the trees so both see the same machine load; the table gives each figure's
median over the rounds and after/before. Figures are records/s of VALUE_BYTES-byte values.

Run: `.venv/bin/python bench/producer_pipelining.py [--records 100000] [--rounds 2]
[--before main]`; hold /tmp/pykraft-cluster.lock around it on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_ROOTS = (
    "proto", "server_common", "quorum", "broker", "metadata_log", "client", "spark", "mirror",
    "cli",
)  # fmt: skip
VALUE_BYTES = 100
WORKLOAD_TIMEOUT_S = 600
WORKLOADS = ("send defaults", "send batch 64k", "perf produce", "perf consume", "poll loop")
PERF_PRODUCE_RATE = re.compile(r"^\d+ records sent, ([\d.]+) records/sec", re.MULTILINE)
CHILD_RATE = re.compile(r"^rate ([\d.]+)$", re.MULTILINE)


def child(workload: str, address: str, topic: str, records: int) -> None:
    """Runs one workload with whichever pykraft is on the path; prints `rate <records/s>`."""
    from pykraft.client import Consumer, Producer, TopicPartition

    value = b"x" * VALUE_BYTES
    if workload == "poll loop":
        with Consumer(bootstrap_servers=address, auto_offset_reset="earliest") as consumer:
            started = time.perf_counter()
            partitions = [TopicPartition(topic, p) for p in consumer.partitions_for(topic)]
            consumer.assign(partitions)
            consumer.seek_to_beginning(partitions)
            count = 0
            while count < records:
                count += len(consumer.poll(500))
            print(f"rate {count / (time.perf_counter() - started)}")
        return
    batch_size = 65536 if workload == "send batch 64k" else 16384
    with Producer(bootstrap_servers=address, batch_size=batch_size) as producer:
        producer.send(topic, value).result(timeout=30)  # metadata and connections warm
        started = time.perf_counter()
        futures = [producer.send(topic, value) for _ in range(records)]
        producer.flush(timeout=WORKLOAD_TIMEOUT_S)
        elapsed_s = time.perf_counter() - started
    failed = sum(1 for future in futures if future.exception(timeout=0) is not None)
    assert not failed, f"{failed} sends failed"
    print(f"rate {records / elapsed_s}")


def export_tree(ref: str, into: Path) -> Path:
    """`ref`'s files under `into`/tree, and `into`/path/pykraft mapping its packages: the
    directory to put first on PYTHONPATH."""
    tree = into / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return package_path(tree, into / "path")


def copy_checkout(into: Path) -> Path:
    """This checkout's packages as they are now (edits during the run do not reach it)."""
    tree = into / "tree"
    for root in PACKAGE_ROOTS:
        shutil.copytree(ROOT / root, tree / root, ignore=shutil.ignore_patterns("__pycache__"))
    return package_path(tree, into / "path")


def package_path(tree: Path, path: Path) -> Path:
    """A directory holding `pykraft`, whose packages are `tree`'s top-level folders."""
    package = path / "pykraft"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for root in PACKAGE_ROOTS:
        (package / root).symlink_to(tree / root)
    return path


def run_workload(path: Path, workload: str, address: str, topic: str, records: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(path)}
    if workload.startswith("perf "):
        command = [sys.executable, "-c", "from pykraft.cli.main import main; main()"]
        if workload == "perf produce":
            command += ["perf", "produce", "--num-records", str(records)]
            command += ["--record-size", str(VALUE_BYTES), "--throughput", "-1"]
        else:
            command += ["perf", "consume", "--messages", str(records)]
        command += ["--topic", topic, "--bootstrap-server", address]
    else:
        command = [sys.executable, __file__, "--child", workload, address, topic, str(records)]
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=WORKLOAD_TIMEOUT_S
    )
    assert done.returncode == 0, f"{workload}: {done.stderr[-2000:]}"
    if workload == "perf consume":
        # the data line after Kafka's header: nMsg.sec is its sixth field
        return float(done.stdout.strip().splitlines()[-1].split(", ")[5])
    pattern = PERF_PRODUCE_RATE if workload == "perf produce" else CHILD_RATE
    match = pattern.findall(done.stdout)
    assert match, f"{workload}: no rate in {done.stdout[-2000:]!r}"
    return float(match[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--before", default="main", help="git ref to compare against")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        workload, address, topic, records = args.child
        child(workload, address, topic, int(records))
        return
    sys.path.insert(0, str(ROOT))
    from tests.integration.test_cluster_e2e import TOPIC, bootstrap, three_broker_cluster

    with tempfile.TemporaryDirectory() as tmp:
        trees = {
            f"before ({args.before})": export_tree(args.before, Path(tmp) / "before"),
            "after": copy_checkout(Path(tmp) / "after"),
        }
        rates: dict[tuple[str, str], list[float]] = {}
        cluster_dir = Path(tmp) / "cluster"
        cluster_dir.mkdir()
        with three_broker_cluster(cluster_dir) as (_, brokers):
            address = bootstrap(brokers)
            for round_index in range(args.rounds):
                for name, path in trees.items():
                    for workload in WORKLOADS:
                        rate = run_workload(path, workload, address, TOPIC, args.records)
                        rates.setdefault((name, workload), []).append(rate)
                        print(f"round {round_index + 1} {name:<16} {workload:<15} {rate:>9.0f}/s")
    before, after = trees
    print(f"\n{args.records} records of {VALUE_BYTES} B, median of {args.rounds} rounds, records/s")
    print(f"{'workload':<16}{before:>16}{after:>12}{'after/before':>14}")
    for workload in WORKLOADS:
        was = statistics.median(rates[(before, workload)])
        now = statistics.median(rates[(after, workload)])
        print(f"{workload:<16}{was:>16.0f}{now:>12.0f}{now / was:>14.2f}")


if __name__ == "__main__":
    main()
