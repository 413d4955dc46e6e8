"""A broker's start-up work on its stored metadata image, without a cluster (issue 18 §3.2: a
broker restart until unfenced, goal <= 5 s at 1,000,000 partitions).

It writes once, with this tree's code, the image a broker stores (`ImageFile`, its metadata log
empty) of `--partitions` partitions in topics of `--partitions-per-topic`, replication factor 3
over `--brokers` brokers, as `bench/metadata_scale.py` places them; then, for each `--code`
tree (`bench/source_tree.py`) and each of `--rounds` rounds (the order reversed every other
round), a child process running that tree builds the broker (`Broker(config)`, node
`--broker-id`, hosting none of the replicas by default) and does what `Broker.start` does
before it serves: `MetadataFollower.load()` (read and decode the file, build the image, hand it
to the replica manager, the fetchers and the group coordinator) under `long_lived_objects`,
with the collector as the server sets it (`bound_full_collections`). It prints, per tree, the
CPU seconds (process time) and wall seconds of that load, and the CPU seconds of writing that
image again (what a broker spends after a whole-image fetch), the medians over the rounds.

Run: `.venv/bin/python bench/broker_image_load.py --code /tmp/main-tree --code .` (no lock
needed: no cluster, one process at a time).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.source_tree import THIS_TREE, SourceTree, source_tree  # noqa: E402

REPLICATION_FACTOR = 3


def write_image(directory: Path, partitions: int, per_topic: int, brokers: int) -> None:
    """The broker's stored image (and an empty metadata log) of `partitions` partitions in
    `directory`, replicas rotating over brokers 1..`brokers`, with the brokers registered."""
    from pykraft.broker.metadata_image_file import ImageFile
    from pykraft.metadata_log import encode_records
    from pykraft.metadata_log.image_loader import SnapshotLoader
    from pykraft.metadata_log.records import (
        Endpoint,
        PartitionRecord,
        Record,
        RegisterBrokerRecord,
        TopicRecord,
    )

    loader = SnapshotLoader(offset=partitions + partitions // per_topic + brokers, epoch=1)
    registrations: list[Record] = [
        RegisterBrokerRecord(b, uuid.UUID(int=b), 1, (Endpoint("grpc", "127.0.0.1", 9000 + b),))
        for b in range(1, brokers + 1)
    ]
    loader.take_chunk(encode_records(registrations))
    for t in range(partitions // per_topic):
        topic_id = uuid.UUID(int=t + 1)
        records: list[Record] = [TopicRecord(f"t{t}", topic_id)]
        for p in range(per_topic):
            first = (t * per_topic + p) % brokers
            replicas = tuple(1 + (first + k) % brokers for k in range(REPLICATION_FACTOR))
            records.append(PartitionRecord(topic_id, p, replicas, replicas, replicas[0], 0, 0))
        loader.take_chunk(encode_records(records))
    directory.mkdir(parents=True, exist_ok=True)
    ImageFile(directory).write(loader.image())


def child(log_dir: Path, broker_id: int) -> None:
    """One load, as `Broker.start` does it; prints its figures as one JSON line."""
    from pykraft.broker.config import BrokerConfig
    from pykraft.broker.metadata_image_file import ImageFile
    from pykraft.broker.server import Broker
    from pykraft.server_common.gc_pauses import bound_full_collections, long_lived_objects

    bound_full_collections()
    config = BrokerConfig(
        node_id=broker_id,
        listener="127.0.0.1:1",
        log_dirs=(log_dir,),
        controller_bootstrap_servers=("127.0.0.1:1",),
    )
    broker = Broker(config)
    cpu_started, wall_started = time.process_time(), time.perf_counter()
    with long_lived_objects():
        broker.metadata.load()
    cpu_s, wall_s = time.process_time() - cpu_started, time.perf_counter() - wall_started
    image = broker.metadata.image
    partitions = sum(len(t.partitions) for t in image.topics.by_id.values())
    with tempfile.TemporaryDirectory() as tmp:
        write_started = time.process_time()
        ImageFile(Path(tmp)).write(image)  # what a fetched snapshot costs the broker after it
        write_cpu_s = time.process_time() - write_started
    figures = {"cpu_s": cpu_s, "wall_s": wall_s, "write_cpu_s": write_cpu_s}
    print(json.dumps({**figures, "partitions": partitions}))


def measure(tree: SourceTree, log_dir: Path, broker_id: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", str(log_dir), "--broker-id", str(broker_id)]
    env = tree.env(os.environ)
    output = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    figures: dict[str, float] = json.loads(output.strip().splitlines()[-1])
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--partitions-per-topic", type=int, default=100)
    parser.add_argument("--brokers", type=int, default=30)
    parser.add_argument("--broker-id", type=int, default=31, help="31: hosts no replica")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--code", type=source_tree, action="append", default=[])
    parser.add_argument(
        "--image-dir", type=Path, help="a log directory to keep the image in (reused if there)"
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.broker_id)
        return 0
    trees: list[SourceTree] = args.code or [THIS_TREE]
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = args.image_dir or Path(tmp)
        image_path = log_dir / "__cluster_metadata" / "image"
        started = time.perf_counter()
        how = "reused"
        if not image_path.exists():
            write_image(image_path.parent, args.partitions, args.partitions_per_topic, args.brokers)
            how = f"written in {time.perf_counter() - started:.1f} s"
        size_mib = image_path.stat().st_size / 2**20
        print(f"image of {args.partitions} partitions ({size_mib:.1f} MiB) {how}")
        results: dict[str, list[dict[str, float]]] = {tree.label: [] for tree in trees}
        for round_ in range(args.rounds):
            for tree in trees if round_ % 2 == 0 else trees[::-1]:
                figures = measure(tree, log_dir, args.broker_id)
                assert figures["partitions"] == args.partitions, figures
                results[tree.label].append(figures)
                print(
                    f"round {round_ + 1}, {tree.label}: load {figures['cpu_s']:.2f} s CPU, "
                    f"{figures['wall_s']:.2f} s wall; image written in "
                    f"{figures['write_cpu_s']:.2f} s CPU",
                    flush=True,
                )
    for label, runs in results.items():
        print(
            f"[{args.partitions} partitions, broker {args.broker_id}] {label}: stored image "
            f"loaded in {statistics.median(r['cpu_s'] for r in runs):.2f} s CPU, "
            f"{statistics.median(r['wall_s'] for r in runs):.2f} s wall, written in "
            f"{statistics.median(r['write_cpu_s'] for r in runs):.2f} s CPU "
            f"(median of {len(runs)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
