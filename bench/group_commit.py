"""Group commit of the controller (issue 18 §2.3): many concurrent small writes, with one write per
Raft entry (`--entry-operations-max 1`, how the controller wrote before) and with writes sharing
entries (the defaults), in alternating rounds of one run on three real controller processes.

Prints operations/s for IncrementalAlterConfigs (one record each) and CreateTopics of one
partition (two records each) from `--clients` threads, each setting's median over `--rounds`.

Run: `flock /tmp/pykraft-cluster.lock .venv/bin/python bench/group_commit.py`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.metadata_quorum import (  # noqa: E402
    alter_config_op,
    create_topic_op,
    quorum_with_brokers,
    throughput,
)
from pykraft.client import AdminClient  # noqa: E402

SETTINGS = {"one write per entry": ("--entry-operations-max", "1"), "group commit": ()}


def measure(settings: tuple[str, ...], round_index: int, args: argparse.Namespace) -> list[float]:
    """(alter config ops/s, create topic ops/s) on a fresh quorum started with `settings`."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        quorum_with_brokers(Path(tmp), settings) as (quorum, _),
        AdminClient(quorum.bootstrap) as admin,
    ):
        create_topic_op(admin, "target", 1)(0)
        alter = alter_config_op(admin, "target-0")
        create = create_topic_op(admin, f"r{round_index}", 1)
        return [
            throughput(op, clients=args.clients, seconds=args.seconds)[0] for op in (alter, create)
        ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rates: dict[str, list[list[float]]] = {name: [] for name in SETTINGS}
    for round_index in range(args.rounds):
        for name, settings in SETTINGS.items():
            rates[name].append(measure(settings, round_index, args))
            print(f"round {round_index + 1}, {name}: {rates[name][-1]}", flush=True)
    for name, runs in rates.items():
        alter, create = (statistics.median(column) for column in zip(*runs, strict=True))
        print(
            f"{name}, {args.clients} clients, median of {args.rounds}: alter config "
            f"{alter:.0f} ops/s, create topic (1 partition) {create:.0f} ops/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
