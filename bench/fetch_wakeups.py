"""Benchmark of appends while Fetch long polls are parked on other partitions, in one process (no
cluster): what every parked fetch's wake-up costs the append path (issue 17 §4).

Broker 1's ReplicaManager over real logs (the unit tests' harness) hosts `--partitions`
single-replica partitions; one thread per partition but the first parks a consumer Fetch at its
log end (max wait 60 s), then this thread appends `--appends` batches of one 100-byte record with
acks=1 to the first partition, paced at `--rate` a second as a producer's requests come, and
prints the process's CPU time per append. Each append signals a change: a fetch that re-reads
all of its partitions on every change anywhere spends CPU (and the GIL) on every append.

Run: `.venv/bin/python bench/fetch_wakeups.py [--partitions 32] [--appends 3000]
[--rate 2000]`; for the figures of another source tree, put it first on the path:
`PYTHONPATH=DIR .venv/bin/python bench/fetch_wakeups.py` (DIR holding a `pykraft` package, e.g.
`git archive main | tar -x -C DIR/pykraft`). Compare runs taken one after the other.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.unit.broker.replica_harness import Harness  # noqa: E402

PARKED_WAIT_MS = 60_000
VALUE = b"x" * 100


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--appends", type=int, default=3000)
    parser.add_argument("--rate", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        harness = Harness(Path(tmp), assignments=[(1,)] * args.partitions)
        parked = [
            threading.Thread(
                target=harness.fetch,
                args=({p: 0},),
                kwargs={"wait_ms": PARKED_WAIT_MS, "min_bytes": 1},
                daemon=True,
            )
            for p in range(1, args.partitions)
        ]
        for thread in parked:
            thread.start()
        harness.produce(0, [VALUE])  # warm
        started, cpu_started_s = time.perf_counter(), time.process_time()
        for i in range(args.appends):
            ahead_s = started + i / args.rate - time.perf_counter()
            if ahead_s > 0:
                time.sleep(ahead_s)
            harness.produce(0, [VALUE])
        cpu_s = time.process_time() - cpu_started_s
        print(
            f"{args.appends} appends at {args.rate}/s with {len(parked)} fetches parked on other"
            f" partitions: CPU {cpu_s / args.appends * 1e6:.0f} us per append"
        )
        harness.manager.close()  # wakes the parked fetches: their partitions are gone
        for thread in parked:
            thread.join(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
