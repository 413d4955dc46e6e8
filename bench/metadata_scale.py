"""How the controller quorum's costs grow with the number of partitions (issue 18 §3.2, §3.3).

For each size it starts three real controller processes on 127.0.0.1 and three simulated
registered brokers (`StandInBroker`: registration and heartbeats over real gRPC, no data plane,
so a 2-core machine can hold the sizes), creates the partitions (replication factor 3) and prints:
- creation: seconds and partitions/s (goal >= 10,000/s), from `--clients` admin clients each
  sending CreateTopics of `--topics-per-request` topics;
- memory: the active controller's resident set before and after, per partition, and the image
  alone (tracemalloc of the image rebuilt in this process), per partition (goal: 1,000,000
  partitions within a few GB);
- full snapshot: bytes and ms to encode the state machine's snapshot (what Raft compacts to) and
  to restore it, and a new broker's MetadataFetch of the whole image from offset -1;
- controller failover: kill -9 of the active controller until the next committed write (goal
  <= 1 s);
- broker restart: a stand-in broker stops heartbeating (kill -9) and comes back with a new
  incarnation until its heartbeat says unfenced (goal <= 5 s; the old session must expire
  first; a real broker also loads its image).

Run: `.venv/bin/python bench/metadata_scale.py --partitions 10000,100000` (under
`flock /tmp/pykraft-cluster.lock`). Figures depend on the machine; compare ratios in one run.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.metadata_quorum import failover_ms, quorum_with_brokers  # noqa: E402
from pykraft.client import AdminClient, NewTopic, TopicAlreadyExistsError  # noqa: E402
from pykraft.metadata_log.delta import replay_all  # noqa: E402
from pykraft.metadata_log.image import MetadataImage  # noqa: E402
from pykraft.metadata_log.records import (  # noqa: E402
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    TopicRecord,
)
from pykraft.proto import admin_pb2  # noqa: E402
from pykraft.quorum.controller.placement import ReplicaPlacer  # noqa: E402
from pykraft.quorum.state_machine import MetadataStateMachine  # noqa: E402
from tests.integration.controllers import Quorum, StandInBroker, fetch_image  # noqa: E402
from tests.integration.processes import wait_for  # noqa: E402

REPLICATION_FACTOR = 3
# Every request stays under the controller's RECORDS_PER_OPERATION_MAX (10,000 records).
TOPICS_PER_REQUEST_DEFAULT = 90
PARTITIONS_PER_TOPIC_DEFAULT = 100


def rss_bytes(pid: int) -> int:
    """The resident set of process `pid` (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def active_pid(quorum: Quorum) -> int:
    process = quorum.wait_active().process
    assert process is not None
    return process.pid


def create_all(
    admin_address: str, topics: list[str], *, clients: int, per_request: int, partitions: int
) -> float:
    """Creates `topics` from `clients` admin clients, `per_request` topics per CreateTopics;
    returns the seconds until the last is committed.

    A request whose answer was lost in a controller change is retried by the client, and when
    the first attempt had committed the retry finds its topics: TOPIC_ALREADY_EXISTS counts as
    created here, and `_measure` checks the image holds every partition."""
    requests = [topics[i : i + per_request] for i in range(0, len(topics), per_request)]
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            with AdminClient(admin_address) as admin:
                for names in requests[index::clients]:
                    new = [NewTopic(name, partitions, REPLICATION_FACTOR, {}) for name in names]
                    with contextlib.suppress(TopicAlreadyExistsError):
                        admin.create_topics(new)
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def image_bytes(quorum: Quorum) -> tuple[MetadataImage, int, float]:
    """The whole image fetched as a new broker would, its size in memory (tracemalloc) and the
    ms the fetch and rebuild took."""
    stub = quorum.controller_stub(quorum.wait_active().address)
    tracemalloc.start()
    try:
        started = time.perf_counter()
        image = fetch_image(stub)
        fetch_ms = (time.perf_counter() - started) * 1000
        size, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return image, size, fetch_ms


def snapshot_costs(image: MetadataImage) -> tuple[int, float, float]:
    """(bytes, ms to write, ms to restore) of the controller state machine's snapshot."""
    machine = MetadataStateMachine(tail_records_max=1)
    machine.image = image
    started = time.perf_counter()
    data = machine.snapshot()
    write_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    MetadataStateMachine(tail_records_max=1).restore(data)
    return len(data), write_ms, (time.perf_counter() - started) * 1000


def topic_records(topic_count: int, per_topic: int) -> list[list[Record]]:
    """The records of creating `topic_count` topics of `per_topic` partitions, one list per
    topic, as the controller writes them."""
    brokers = (1, 2, 3)
    created = []
    for t in range(topic_count):
        topic_id = uuid.UUID(int=t + 1)
        records: list[Record] = [TopicRecord(f"t{t}", topic_id)]
        for p in range(per_topic):
            replicas = tuple(brokers[(p + k) % 3] for k in range(REPLICATION_FACTOR))
            records.append(PartitionRecord(topic_id, p, replicas, replicas, replicas[0], 0, 0))
        created.append(records)
    return created


def image_costs(partition_count: int, per_topic: int) -> None:
    """The image alone, in this process: replaying the creation one topic per delta (as the
    state machine applies one batch per Raft entry), its memory, one small change at that size
    and the snapshot."""
    tracemalloc.start()
    created = topic_records(partition_count // per_topic, per_topic)
    started = time.perf_counter()
    image = MetadataImage.EMPTY
    for records in created:
        image = replay_all(image, records).apply(offset=image.offset + len(records), epoch=1)
    replay_s = time.perf_counter() - started
    del created, records  # what stays is what the image holds
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    change = PartitionChangeRecord(uuid.UUID(int=1), 0, isr=(1, 2))
    rounds = 200
    started = time.perf_counter()
    for i in range(rounds):
        replay_all(image, [change]).apply(offset=image.offset + 1 + i, epoch=1)
    change_us = (time.perf_counter() - started) / rounds * 1e6
    started = time.perf_counter()
    ReplicaPlacer.from_image(image)  # what every CreateTopics decision starts with
    placer_us = (time.perf_counter() - started) * 1e6
    snapshot_size, write_ms, restore_ms = snapshot_costs(image)
    print(
        f"[{partition_count} partitions, image in process] replay one topic per delta: "
        f"{replay_s:.1f} s, {partition_count / replay_s:.0f} partitions/s; image "
        f"{size / 2**20:.0f} MiB, {size / partition_count:.0f} bytes/partition; one partition "
        f"change {change_us:.0f} us; replica placer {placer_us:.0f} us; snapshot "
        f"{snapshot_size / 2**20:.1f} MiB, write "
        f"{write_ms:.0f} ms, restore {restore_ms:.0f} ms"
    )


def restart_ms(broker: StandInBroker) -> float:
    """A broker that stops heartbeating (kill -9) and comes back with a new incarnation, until a
    heartbeat says unfenced: the controller refuses the new incarnation while the old session
    lives, so this includes the rest of the session timeout."""
    broker.pause()
    started = time.perf_counter()
    broker.incarnation_id = str(uuid.uuid4())

    def registered_and_unfenced() -> bool:
        if broker.broker_epoch < 0:
            try:
                broker.register()
            except AssertionError:  # DUPLICATE_BROKER_REGISTRATION while the old session lives
                return False
        return not broker.heartbeat().is_fenced

    broker.broker_epoch = -1
    wait_for(registered_and_unfenced, timeout_s=60, what=f"broker {broker.broker_id} unfenced")
    elapsed = (time.perf_counter() - started) * 1000
    broker.start()
    return elapsed


def run_size(partition_count: int, args: argparse.Namespace) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        quorum_with_brokers(Path(tmp)) as (quorum, brokers),
    ):
        try:
            _measure(quorum, brokers, partition_count, args)
        except Exception:
            for log in sorted(Path(tmp).glob("controller-*.log")):
                print(f"--- tail of {log.name}", *log.read_text().splitlines()[-60:], sep="\n")
            raise


def _measure(
    quorum: Quorum, brokers: list[StandInBroker], partition_count: int, args: argparse.Namespace
) -> None:
    per_topic = args.partitions_per_topic
    topics = [f"t{i}" for i in range(partition_count // per_topic)]
    rss_before = rss_bytes(active_pid(quorum))
    seconds = create_all(
        quorum.bootstrap,
        topics,
        clients=args.clients,
        per_request=args.topics_per_request,
        partitions=per_topic,
    )
    rss_after = rss_bytes(active_pid(quorum))
    created = len(topics) * per_topic
    epoch = (
        quorum.admin(quorum.wait_active().address)
        .DescribeQuorum(admin_pb2.DescribeQuorumRequest(), timeout=10)
        .leader_epoch
    )
    print(
        f"[{created} partitions] create ({len(topics)} topics x {per_topic}, RF 3, "
        f"{args.clients} clients, {args.topics_per_request} topics/request): {seconds:.1f} s, "
        f"{created / seconds:.0f} partitions/s; the quorum's term is {epoch} after it (1 + the "
        "elections meanwhile)"
    )
    print(
        f"[{created} partitions] active controller RSS {rss_before / 2**20:.0f} -> "
        f"{rss_after / 2**20:.0f} MiB, {(rss_after - rss_before) / created:.0f} bytes/partition"
    )
    image, size, fetch_ms = image_bytes(quorum)
    held = sum(len(topic.partitions) for topic in image.topics.by_id.values())
    assert held == created, f"the image holds {held} partitions, not {created}"
    print(
        f"[{created} partitions] image in memory {size / 2**20:.1f} MiB, "
        f"{size / created:.0f} bytes/partition; whole-image MetadataFetch from -1 and rebuild "
        f"{fetch_ms:.0f} ms"
    )
    snapshot_size, write_ms, restore_ms = snapshot_costs(image)
    print(
        f"[{created} partitions] full snapshot {snapshot_size / 2**20:.1f} MiB: write "
        f"{write_ms:.0f} ms, restore {restore_ms:.0f} ms"
    )
    with AdminClient(quorum.bootstrap) as admin:
        # A restarted controller replays its journal (or loads its snapshot) of the whole image.
        times = failover_ms(quorum, admin, args.failovers, rejoin_timeout_s=300)
    print(
        f"[{created} partitions] controller failover (kill -9 until the next committed write), "
        f"{len(times)} runs: median {statistics.median(times):.0f} ms, max {max(times):.0f} ms"
    )
    print(
        f"[{created} partitions] stand-in broker kill -9 and restart until unfenced: "
        f"{restart_ms(brokers[0]):.0f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="10000,100000", help="comma-separated sizes")
    parser.add_argument("--partitions-per-topic", type=int, default=PARTITIONS_PER_TOPIC_DEFAULT)
    parser.add_argument("--topics-per-request", type=int, default=TOPICS_PER_REQUEST_DEFAULT)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--failovers", type=int, default=3)
    parser.add_argument(
        "--image-only", action="store_true", help="only the in-process image costs (no cluster)"
    )
    args = parser.parse_args()
    for size in (int(s) for s in args.partitions.split(",")):
        image_costs(size, args.partitions_per_topic)
        if not args.image_only:
            run_size(size, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
