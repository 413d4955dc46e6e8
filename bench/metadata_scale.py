"""How the controller quorum's costs grow with the number of partitions (issue 18 §3.2, §3.3).

For each size it starts three real controller processes on 127.0.0.1 and `--brokers` (3)
simulated registered brokers (`StandInBroker`: registration and heartbeats over real gRPC, no data
plane, so a 2-core machine can hold the sizes; each holds 3/N of the replicas), creates the
partitions (replication factor 3) and prints:
- creation: seconds and partitions/s (goal >= 10,000/s), from `--clients` admin clients each
  sending CreateTopics of `--topics-per-request` topics;
- memory: the active controller's resident set before and after, per partition, and the image
  alone (tracemalloc of the image rebuilt in this process), per partition (goal: 1,000,000
  partitions within a few GB);
- full snapshot: the controller's Raft snapshot file (what Raft compacts to; written and
  restored chunk by chunk): bytes, ms to write and to restore it, and the peak memory each
  allocates beyond what it keeps (tracemalloc, in a second pass); and a new broker's
  MetadataFetch of the whole image from offset -1;
- controller failover: kill -9 of the active controller until the next committed write (goal
  <= 1 s);
- broker restart: a stand-in broker stops heartbeating and comes back with a new incarnation
  until its heartbeat says unfenced (goal <= 5 s): killed (its session stream ends, so it is
  fenced at once, as a real broker killed with -9), then silent (the old session must expire
  first); a real broker also loads its image;
- MetadataFetch as a stream (issue 18 §2.2): the messages of a whole-image fetch from -1 at the
  broker's 1 MiB limit (how many, the largest, the total: before the stream, the total was one
  message); and a real broker process holding no partition (all are on the stand-ins), started,
  stopped and started again until RUNNING (unfenced), with the records it fetched: after a
  clean stop it loads its stored image and fetches only the tail; with its image removed, all.
  `--no-failures` leaves out the failover and the stand-in kill (both fence or elect at scale);
  `--no-real-broker` the real broker's starts.

Run: `.venv/bin/python bench/metadata_scale.py --partitions 10000,100000` (under
`flock /tmp/pykraft-cluster.lock`). Figures depend on the machine; compare ratios in one run.
"""

from __future__ import annotations

import argparse
import contextlib
import pickle
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.metadata_quorum import failover_ms, quorum_with_brokers  # noqa: E402
from pykraft.broker.metadata import METADATA_FETCH_BYTES_MAX  # noqa: E402
from pykraft.broker.metadata_image_file import ImageFile  # noqa: E402
from pykraft.broker.metadata_log_file import MetadataLogFile  # noqa: E402
from pykraft.client import AdminClient, NewTopic, TopicAlreadyExistsError  # noqa: E402
from pykraft.metadata_log import encode_records  # noqa: E402
from pykraft.metadata_log.delta import replay_all  # noqa: E402
from pykraft.metadata_log.image import MetadataImage  # noqa: E402
from pykraft.metadata_log.records import (  # noqa: E402
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    TopicRecord,
)
from pykraft.proto import admin_pb2, controller_pb2  # noqa: E402
from pykraft.quorum.config import ControllerConfig  # noqa: E402
from pykraft.quorum.controller.placement import ReplicaPlacer  # noqa: E402
from pykraft.quorum.metadata_fetch import fetch_messages, plan_fetch  # noqa: E402
from pykraft.quorum.raft.snapshot_file import (  # noqa: E402
    SNAPSHOT_FILE_NAME,
    reading_snapshot_file,
    write_snapshot_file,
)
from pykraft.quorum.state_machine import MetadataStateMachine  # noqa: E402
from tests.integration.cluster import make_broker  # noqa: E402
from tests.integration.controllers import Quorum, StandInBroker, fetch_image  # noqa: E402
from tests.integration.metrics_scrape import scrape, with_metrics  # noqa: E402
from tests.integration.processes import BrokerProcess, wait_for  # noqa: E402

REPLICATION_FACTOR = 3
# Every request stays under the controller's RECORDS_PER_OPERATION_MAX (10,000 records).
TOPICS_PER_REQUEST_DEFAULT = 90
PARTITIONS_PER_TOPIC_DEFAULT = 100
# The whole image fetched with tracemalloc on: about 7 s at 100,000 partitions, minutes at 1M.
IMAGE_FETCH_TIMEOUT_S = 900.0


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
        image = fetch_image(stub, timeout_s=IMAGE_FETCH_TIMEOUT_S)
        fetch_ms = (time.perf_counter() - started) * 1000
        size, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return image, size, fetch_ms


@dataclass(frozen=True)
class SnapshotCosts:
    """The controller's Raft snapshot file of one image: its size, the ms to write and restore
    it, and the peak memory each allocates beyond what it keeps (tracemalloc, in a second,
    slower pass)."""

    file_bytes: int
    write_ms: float
    restore_ms: float
    write_peak_bytes: int
    restore_peak_bytes: int

    def __str__(self) -> str:
        return (
            f"snapshot file {self.file_bytes / 2**20:.1f} MiB, write {self.write_ms:.0f} ms "
            f"(peak {self.write_peak_bytes / 2**20:.1f} MiB), restore {self.restore_ms:.0f} ms "
            f"(peak {self.restore_peak_bytes / 2**20:.1f} MiB beyond the image)"
        )


def snapshot_costs(image: MetadataImage) -> SnapshotCosts:
    """What Raft's log compaction writes (`write_snapshot_file` from the state machine's parts)
    and a restart or a lagging follower reads back (its parts restored as they are read)."""
    machine = MetadataStateMachine(tail_records_max=1)
    machine.image = image
    raft_data = pickle.dumps(((b"", image.offset, 1), (b"", image.offset - 1, 1), set()))

    def restore(path: Path) -> MetadataStateMachine:
        restored = MetadataStateMachine(tail_records_max=1)
        with reading_snapshot_file(path) as (_, parts):
            restored.restore(parts)
        return restored

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / SNAPSHOT_FILE_NAME
        started = time.perf_counter()
        write_snapshot_file(path, raft_data, machine.snapshot())
        write_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        restore(path)
        restore_ms = (time.perf_counter() - started) * 1000
        tracemalloc.start()
        try:
            write_snapshot_file(path, raft_data, machine.snapshot())
            write_peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.reset_peak()
            restored = restore(path)
            kept, restore_peak = tracemalloc.get_traced_memory()
            del restored
        finally:
            tracemalloc.stop()
        file_bytes = path.stat().st_size
    return SnapshotCosts(file_bytes, write_ms, restore_ms, write_peak, restore_peak - kept)


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


def stream_costs(image: MetadataImage, partition_count: int) -> None:
    """A whole-image MetadataFetch in process: what the controller thread spends choosing it,
    then the messages drawn at the broker's limit (as a gRPC thread draws them); and the
    broker's stored image written whole (each change before the log; now after every
    METADATA_LOG_BYTES_MAX of changes) against one change appended to its log."""
    machine = MetadataStateMachine(tail_records_max=1)
    machine.image = image
    machine.restore(machine.snapshot())  # as after a restart: no tail, a fetch gets a snapshot
    config = ControllerConfig(
        node_id=1, voters={1: "-"}, controller_listeners={1: "-"}, data_dir=Path("-")
    )
    started = time.perf_counter()
    plan = plan_fetch(machine, -1, config)
    plan_us = (time.perf_counter() - started) * 1e6
    started = time.perf_counter()
    sizes = [m.ByteSize() for m in fetch_messages(plan, METADATA_FETCH_BYTES_MAX)]
    draw_ms = (time.perf_counter() - started) * 1000
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        ImageFile(Path(tmp)).write(image)
        image_write_ms = (time.perf_counter() - started) * 1000
        change = encode_records([PartitionChangeRecord(uuid.UUID(int=1), 0, isr=(1, 2))])
        started = time.perf_counter()
        MetadataLogFile(Path(tmp)).append([(image.offset + 1, 1, change)])
        append_ms = (time.perf_counter() - started) * 1000
    print(
        f"[{partition_count} partitions, in process] whole-image MetadataFetch: controller "
        f"thread {plan_us:.0f} us to choose it, then {len(sizes)} messages drawn in "
        f"{draw_ms:.0f} ms, largest {max(sizes) / 2**20:.2f} MiB of {sum(sizes) / 2**20:.2f} "
        f"MiB (before the stream: one message of it all, encoded on the controller thread); "
        f"broker: stored image written whole {image_write_ms:.0f} ms, one change appended to "
        f"its log {append_ms:.1f} ms"
    )


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
    snapshot = snapshot_costs(image)
    stream_costs(image, partition_count)
    print(
        f"[{partition_count} partitions, image in process] replay one topic per delta: "
        f"{replay_s:.1f} s, {partition_count / replay_s:.0f} partitions/s; image "
        f"{size / 2**20:.0f} MiB, {size / partition_count:.0f} bytes/partition; one partition "
        f"change {change_us:.0f} us; replica placer {placer_us:.0f} us; {snapshot}"
    )


def restart_ms(broker: StandInBroker, *, killed: bool) -> float:
    """A broker that stops heartbeating and comes back with a new incarnation, until a heartbeat
    says unfenced. `killed`: its session stream ends as a kill -9's socket closes, so the fence
    starts at once; otherwise it falls silent (paused, cut off) and the controller refuses the
    new incarnation while the old session lives, so this includes the rest of the session
    timeout."""
    session = broker.open_session() if killed else None
    broker.pause()
    started = time.perf_counter()
    if session is not None:
        session.cancel()
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


def fetch_stream_sizes(quorum: Quorum) -> tuple[int, int, int, float]:
    """(messages, largest message bytes, total bytes, ms) of a whole-image MetadataFetch from -1
    at the broker's message limit, the stream drawn to its end."""
    stub = quorum.controller_stub(quorum.wait_active().address)
    request = controller_pb2.MetadataFetchRequest(
        broker_id=-1, after_offset=-1, max_wait_ms=0, max_bytes=METADATA_FETCH_BYTES_MAX
    )
    started = time.perf_counter()
    sizes = [response.ByteSize() for response in stub.MetadataFetch(request, timeout=120)]
    return len(sizes), max(sizes), sum(sizes), (time.perf_counter() - started) * 1000


def _running(address: str) -> bool:
    """Whether the broker's /metrics says RUNNING (3): registered, caught up and unfenced."""
    try:
        return scrape(address)[("kafka_server_kafkaserver_brokerstate", ())] == 3
    except OSError:  # not listening yet
        return False


# Log lines of a broker's start, in order: its stored image loaded, registered, unfenced.
START_STEPS = (
    ("image loaded", "metadata image on disk as of offset"),
    ("registered", "registered with broker epoch"),
    ("snapshot applied", "metadata snapshot as of offset"),
    ("unfenced", "unfenced: RUNNING"),
)


def broker_start_ms(broker: BrokerProcess, metrics_address: str) -> tuple[float, int, str]:
    """Starts `broker`: ms until RUNNING, the metadata records it fetched meanwhile, and when
    (ms after the start) its log says each of START_STEPS happened (where the time went)."""
    log_start = broker.log_path.stat().st_size if broker.log_path.exists() else 0
    started, started_wall_s = time.perf_counter(), time.time()
    broker.start()
    wait_for(lambda: _running(metrics_address), timeout_s=300, what="the broker RUNNING")
    elapsed = (time.perf_counter() - started) * 1000
    fetched = scrape(metrics_address)[("pykraft_broker_metadata_records_fetched_total", ())]
    with open(broker.log_path, "rb") as log_file:
        log_file.seek(log_start)
        lines = log_file.read().decode(errors="replace").splitlines()
    steps = []
    for name, text in START_STEPS:
        line = next((line for line in lines if text in line), None)
        if line is not None:  # "2026-11-26 11:12:38,542 INFO ...": local time, milliseconds
            moment = time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S"))
            steps.append(f"{name} {(moment + int(line[20:23]) / 1000 - started_wall_s) * 1000:.0f}")
    return elapsed, int(fetched), ", ".join(steps)


def real_broker_restarts(quorum: Quorum, tmp: Path, created: int, broker_id: int) -> None:
    broker = make_broker(tmp, quorum, broker_id)
    metrics_address = with_metrics(broker)
    try:
        steps = (
            ("first start (no stored image)", False),
            ("restart after a clean stop", False),
            ("restart with its stored image removed", True),
        )
        for how, remove_image in steps:
            if remove_image:
                broker.image_path.unlink()
            elapsed, fetched, log_steps = broker_start_ms(broker, metrics_address)
            # A fetched image is written after the broker acted on it (and is unfenced).
            wait_for(broker.image_path.exists, timeout_s=300, what="the stored image written")
            image_bytes = broker.image_path.stat().st_size
            print(
                f"[{created} partitions] real broker (no replicas), {how}: RUNNING after "
                f"{elapsed:.0f} ms, {fetched} metadata records fetched (stored image "
                f"{image_bytes / 2**20:.1f} MiB); its log, ms after the start: {log_steps}"
            )
            assert broker.stop(timeout_s=120) == 0
    finally:
        broker.close()


def run_size(partition_count: int, args: argparse.Namespace) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        quorum_with_brokers(Path(tmp), broker_count=args.brokers) as (quorum, brokers),
    ):
        try:
            _measure(quorum, partition_count, args)
            count, largest, total, stream_ms = fetch_stream_sizes(quorum)
            print(
                f"[{partition_count} partitions] whole-image MetadataFetch stream: {count} "
                f"messages, largest {largest / 2**20:.2f} MiB, total {total / 2**20:.2f} MiB "
                f"(one message before the stream), drawn in {stream_ms:.0f} ms"
            )
            if not args.no_real_broker:
                real_broker_restarts(quorum, Path(tmp), partition_count, args.brokers + 1)
            if not args.no_failures:
                _fail(quorum, brokers, partition_count, args)
        except Exception:
            for log in sorted(Path(tmp).glob("controller-*.log")):
                print(f"--- tail of {log.name}", *log.read_text().splitlines()[-60:], sep="\n")
            raise


def _measure(quorum: Quorum, partition_count: int, args: argparse.Namespace) -> None:
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
    print(f"[{created} partitions] {snapshot_costs(image)}")


def _fail(
    quorum: Quorum, brokers: list[StandInBroker], created: int, args: argparse.Namespace
) -> None:
    with AdminClient(quorum.bootstrap) as admin:
        # A restarted controller replays its journal (or loads its snapshot) of the whole image.
        times = failover_ms(quorum, admin, args.failovers, rejoin_timeout_s=300)
    print(
        f"[{created} partitions] controller failover (kill -9 until the next committed write), "
        f"{len(times)} runs: median {statistics.median(times):.0f} ms, max {max(times):.0f} ms"
    )
    for how, killed in (("kill -9 (its session stream ends)", True), ("silent", False)):
        print(
            f"[{created} partitions] stand-in broker {how}, restarted until unfenced: "
            f"{restart_ms(brokers[0], killed=killed):.0f} ms"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="10000,100000", help="comma-separated sizes")
    parser.add_argument("--partitions-per-topic", type=int, default=PARTITIONS_PER_TOPIC_DEFAULT)
    parser.add_argument("--topics-per-request", type=int, default=TOPICS_PER_REQUEST_DEFAULT)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument(
        "--brokers",
        type=int,
        default=3,
        help="stand-in brokers the partitions are placed on (each holds 3/N of the replicas; "
        "the restart figures are of one of them)",
    )
    parser.add_argument("--failovers", type=int, default=3)
    parser.add_argument(
        "--image-only", action="store_true", help="only the in-process image costs (no cluster)"
    )
    parser.add_argument(
        "--no-failures", action="store_true", help="no controller failover, no stand-in kill"
    )
    parser.add_argument(
        "--no-real-broker", action="store_true", help="no real broker process started"
    )
    args = parser.parse_args()
    for size in (int(s) for s in args.partitions.split(",")):
        image_costs(size, args.partitions_per_topic)
        if not args.image_only:
            run_size(size, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
