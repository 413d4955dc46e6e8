"""Benchmark of what idle partitions cost replication (issue 17 §7: fetch sessions, KIP-227).

Three controllers and three brokers on 127.0.0.1 (`tests/integration/test_cluster_e2e`'s), one
topic of 6 partitions (replication factor 3, min.insync.replicas=2) that a producer with Kafka's
default settings (bench/client.py's, acks=all) writes `--records` 100-byte records to, `--runs`
times; then `--idle-topics` more topics of 6 partitions that nothing writes, and the same runs
again. Every broker then follows 4 partitions of each idle topic: without fetch sessions each
follower fetch named and the leader checked every one of them. It prints records/s per run and
the ratio of the medians (with idle topics / without).

`--code DIR` (bench/source_tree.py; repeatable) runs every tree on a fresh cluster, in one run:
the controllers and the brokers run it (the producer is this process, this tree's).

Run (it starts clusters): `flock /tmp/pykraft-cluster.lock .venv/bin/python
bench/idle_partitions.py [--records 1000000] [--runs 3] [--idle-topics 9] [--code DIR ...]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.client import DEFAULT_PRODUCER, TOPIC_ARGS  # noqa: E402
from bench.cluster import produce_run  # noqa: E402
from bench.source_tree import add_code_argument, each_tree, trees_of  # noqa: E402
from tests.integration.cluster import create_topic, wait_until_brokers_know  # noqa: E402
from tests.integration.test_cluster_e2e import TOPIC, bootstrap, three_broker_cluster  # noqa: E402

PARTITIONS = 6
WARM_UP_RECORDS = 100_000


def _rates(address: str, records: int, runs: int, label: str) -> list[float]:
    rates = []
    for _ in range(runs):
        run = produce_run(address, records, DEFAULT_PRODUCER, TOPIC)
        rates.append(run.records / run.seconds)
        print(f"{label}: {rates[-1]:,.0f} records/s", flush=True)
    return rates


def _measure(records: int, runs: int, idle_topics: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, three_broker_cluster(Path(tmp)) as (quorum, brokers):
        address = bootstrap(brokers)
        produce_run(address, WARM_UP_RECORDS, DEFAULT_PRODUCER, TOPIC)
        alone = _rates(address, records, runs, "1 topic")
        for index in range(idle_topics):
            create_topic(quorum, f"idle-{index}", PARTITIONS, *TOPIC_ARGS)
            wait_until_brokers_know(brokers, f"idle-{index}", PARTITIONS)
        beside = _rates(address, records, runs, f"1 topic beside {idle_topics} idle ones")
        ratio = statistics.median(beside) / statistics.median(alone)
        print(f"with idle topics / without (medians): {ratio:.2f}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--idle-topics", type=int, default=9)
    add_code_argument(parser)
    args = parser.parse_args()
    for _ in each_tree(trees_of(args)):
        _measure(args.records, args.runs, args.idle_topics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
