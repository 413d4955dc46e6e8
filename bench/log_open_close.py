"""Benchmark of what a broker's start-up and shutdown cost per partition: opening and closing
partition logs in one process, no cluster.

Creates `--logs` logs, writes one batch to each, closes them (each flushes), opens them again (a
clean start-up's load) and closes them idle (a shutdown of partitions that took no writes since
they were opened). Prints each step's time, the median of `--rounds` runs, each in a child
process. `--code DIR` (bench/source_tree.py; repeatable) makes the runs once per tree given
(`--code . --code DIR`: this tree and another), alternating round by round, so "before" and
"after" share the machine's noise; fsync latency dominates, so compare medians.

Run: `.venv/bin/python bench/log_open_close.py [--logs 1000] [--rounds 4] [--code DIR ...]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.source_tree import SourceTree, add_code_argument, in_round_order, trees_of

STEPS = ("create", "close after a write", "reopen", "close idle")


def _run_once(count: int) -> list[float]:
    """The seconds each of STEPS took for `count` logs, in this process."""
    from pykraft.broker.log import LogConfig, PartitionLog
    from pykraft.proto.record_batch import build_batch

    now_ms = 1_700_000_000_000
    times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / f"t-{n}" for n in range(count)]
        shared = _directory_checkpoints(Path(tmp))  # as the broker shares them
        started = time.monotonic()
        logs = [PartitionLog.open(path, LogConfig(), now_ms=now_ms, **shared) for path in paths]
        times.append(time.monotonic() - started)
        for log in logs:
            log.append_as_leader(build_batch([(0, None, b"v")]), leader_epoch=0, now_ms=now_ms)
        for step in ("close", "reopen", "close"):
            started = time.monotonic()
            if step == "close":
                for log in logs:
                    log.close()
                for checkpoints in shared.values():
                    checkpoints.write_all()  # what the broker's shutdown writes after the logs
                    checkpoints.mark_clean_shutdown()
            else:
                shared = _directory_checkpoints(Path(tmp))
                logs = [
                    PartitionLog.open(path, LogConfig(), now_ms=now_ms, **shared) for path in paths
                ]
            times.append(time.monotonic() - started)
    return times


def _directory_checkpoints(log_dir: Path) -> dict[str, Any]:
    """The `checkpoints` argument a broker passes, or none on a tree from before there were
    checkpoint files per log directory (`--code`)."""
    try:
        from pykraft.broker.log.dir_checkpoints import LogDirCheckpoints
    except ImportError:
        return {}
    return {"checkpoints": LogDirCheckpoints(log_dir)}


def _run_child(count: int, tree: SourceTree) -> list[float]:
    child = subprocess.run(
        [sys.executable, __file__, "--logs", str(count), "--child"],
        env=tree.env(os.environ),
        capture_output=True,
        text=True,
        check=True,
    )
    return [float(value) for value in child.stdout.split()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=4)
    add_code_argument(parser)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(*_run_once(args.logs))
        return 0
    trees = trees_of(args)
    results: dict[str, list[list[float]]] = {tree.label: [] for tree in trees}
    for number in range(args.rounds):
        for tree in in_round_order(trees, number):
            results[tree.label].append(_run_child(args.logs, tree))
    for name, runs in results.items():
        medians = [statistics.median(run[step] for run in runs) for step in range(len(STEPS))]
        figures = ", ".join(f"{step} {m:.2f} s" for step, m in zip(STEPS, medians, strict=True))
        print(f"{name}: {args.logs} logs, median of {args.rounds}: {figures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
