"""Full garbage collections while an image of many partitions is built, with and without the
servers' bound (`server_common/gc_pauses.bound_full_collections`, issue 18 §3.2).

Each way runs in a child process of its own (freezing is process-wide): it replays the creation
of `--partitions` partitions one topic per delta, as a controller applies one batch per Raft
entry, and prints how many full collections ran, the longest, and one full collection after it.
A pause longer than the Raft election timeout (300-600 ms) costs the quorum an election.

Run: `.venv/bin/python bench/gc_pauses.py --partitions 1000000` (no cluster; about a minute).
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.metadata_scale import topic_records  # noqa: E402
from pykraft.metadata_log.delta import replay_all  # noqa: E402
from pykraft.metadata_log.image import MetadataImage  # noqa: E402
from pykraft.server_common.gc_pauses import bound_full_collections  # noqa: E402

PER_TOPIC = 100


def measure(partition_count: int, bounded: bool) -> str:
    """Builds the image in this process; the figures as one line."""
    pauses_ms: list[float] = []
    started_s = 0.0

    def timed(phase: str, info: dict[str, int]) -> None:
        nonlocal started_s
        if info["generation"] != 2:
            return
        if phase == "start":
            started_s = time.perf_counter()
        else:
            pauses_ms.append((time.perf_counter() - started_s) * 1000)

    gc.callbacks.append(timed)  # first, so it times the collection without the freeze after it
    if bounded:
        bound_full_collections()
    created = topic_records(partition_count // PER_TOPIC, PER_TOPIC)
    image = MetadataImage.EMPTY
    replay_started_s = time.perf_counter()
    for records in created:
        image = replay_all(image, records).apply(offset=image.offset + len(records), epoch=1)
    replay_s = time.perf_counter() - replay_started_s
    during = list(pauses_ms)
    gc.collect()
    return (
        f"[{partition_count} partitions, {'bounded' if bounded else 'unbounded'}] replay "
        f"{replay_s:.1f} s; {len(during)} full collections, longest {max(during):.0f} ms; "
        f"one full collection afterwards {pauses_ms[-1]:.0f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--child", choices=("bounded", "unbounded"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(measure(args.partitions, args.child == "bounded"))
        return 0
    for way in ("unbounded", "bounded"):
        command = [sys.executable, __file__, "--partitions", str(args.partitions), "--child", way]
        subprocess.run(command, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
