"""Benchmark of one broker's restart at scale on the real 3 + 3 cluster (issue 18 §1.2, §3.2).

Three controllers and three broker processes on 127.0.0.1; `--partitions` partitions (topics of
`--per-topic` partitions) with replication factor 3, so every broker holds `--partitions`
replicas and leads about a third of them. One record goes to every partition (acks=1: the
followers may still lack it, and nothing is flushed). Then, for broker 1:

1. controlled shutdown: SIGTERM until its leaderships have moved (the controller's image) and
   until the process exits;
2. clean start-up: process start until unfenced (DescribeCluster), then until back in the ISR of
   every partition (the controller's image: it has caught up and serves as a follower);
3. one more record everywhere, kill -9 (fenced when its session stream ends), and the same
   start-up after it: the broker recovers only what its recovery checkpoints say is unflushed
   (the active segments here).

`--code DIR` (bench/source_tree.py; repeatable) runs the whole of the above on a fresh cluster
of each tree given: the controllers and brokers run it, for "before" figures in the same
conditions.

Run (it starts a cluster): `flock /tmp/pykraft-cluster.lock .venv/bin/python
bench/broker_restart.py [--partitions 20000] [--code DIR ...]`. Figures depend on the machine (2
shared cores here); compare runs taken one after the other.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.source_tree import add_code_argument, each_tree, trees_of  # noqa: E402
from pykraft.client import AdminClient, NewTopic, Producer  # noqa: E402
from pykraft.metadata_log import MetadataImage  # noqa: E402
from tests.integration.cluster import make_broker, wait_until_brokers_know  # noqa: E402
from tests.integration.controllers import Quorum, running_quorum  # noqa: E402
from tests.integration.processes import BrokerProcess, wait_for  # noqa: E402

TOPICS_PER_REQUEST_MAX = 10  # topics per CreateTopics, so no request carries too many records
WAIT_S = 1800.0
IMAGE_POLL_S = 1.0  # the whole image is fetched each time: not more often
RESTARTED = 1  # the broker restarted


def _topics(args: argparse.Namespace) -> list[str]:
    return [f"r{number:04d}" for number in range(args.partitions // args.per_topic)]


def _polled_image(quorum: Quorum, condition: Callable[[MetadataImage], bool]) -> bool:
    """`condition` of the active controller's image; False (after a pause) if it does not hold
    yet, or if the controller asked stopped being active meanwhile (the helper asserts)."""
    try:
        if condition(quorum.image(timeout_s=60)):
            return True
    except AssertionError as error:
        print(f"  (image not fetched: {str(error).splitlines()[0]})")
    time.sleep(IMAGE_POLL_S)
    return False


def _full_isr(image: MetadataImage, topics: list[str]) -> bool:
    """Every partition of `topics` has all three brokers in its ISR."""
    for name in topics:
        topic = image.topics.get_by_name(name)
        if topic is None or any(len(p.isr) < 3 for p in topic.partitions.values()):
            return False
    return True


def _leads_nothing(image: MetadataImage) -> bool:
    counts = image.topics.leader_counts
    return counts is not None and counts.get(RESTARTED, 0) == 0


def _unfenced(admin: AdminClient) -> bool:
    return any(
        b.id == RESTARTED and b.state.lower() == "unfenced"
        for b in admin.describe_cluster().brokers
    )


def _produce_everywhere(brokers: list[BrokerProcess], args: argparse.Namespace) -> float:
    """One record to every partition (acks=1); returns the seconds it took."""
    started = time.monotonic()
    bootstrap = ",".join(broker.address for broker in brokers)
    with Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=5) as producer:
        futures = [
            producer.send(topic, b"v", partition=partition)
            for topic in _topics(args)
            for partition in range(args.per_topic)
        ]
        producer.flush(timeout=WAIT_S)
    failed = [future for future in futures if future.exception(timeout=0) is not None]
    if failed:
        raise SystemExit(f"{len(failed)} records failed, first: {failed[0].exception(timeout=0)}")
    return time.monotonic() - started


def _create(quorum: Quorum, args: argparse.Namespace) -> float:
    started = time.monotonic()
    topics = _topics(args)
    with AdminClient(quorum.bootstrap) as admin:
        for first in range(0, len(topics), TOPICS_PER_REQUEST_MAX):
            chunk = topics[first : first + TOPICS_PER_REQUEST_MAX]
            admin.create_topics([NewTopic(name, args.per_topic, 3) for name in chunk])
    wait_for(lambda: _polled_image(quorum, lambda image: _full_isr(image, topics)),
             timeout_s=WAIT_S, what="every replica in its ISR")  # fmt: skip
    return time.monotonic() - started


def _known_by_brokers(brokers: list[BrokerProcess], args: argparse.Namespace) -> float:
    """Waits until every broker serves the last topic created, so every topic (a broker
    applies metadata in order); returns the seconds it took. A new partition is in its ISR in
    the controller's image at once, while a broker opens the logs of thousands before it
    publishes them: producing at once asked for unknown topics past the producer's 60 s."""
    started = time.monotonic()
    by_id = {broker.node_id: broker for broker in brokers}
    wait_until_brokers_know(by_id, _topics(args)[-1], args.per_topic, timeout_s=WAIT_S)
    return time.monotonic() - started


def _start_up(quorum: Quorum, broker: BrokerProcess, args: argparse.Namespace) -> None:
    """Starts the stopped `broker` once the controller has fenced it, and times the start."""
    with AdminClient(quorum.bootstrap) as admin:
        wait_for(lambda: not _unfenced(admin), timeout_s=60, what="the stopped broker fenced")
        started = time.monotonic()
        broker.start()
        wait_for(lambda: _alive(broker) and _unfenced(admin), timeout_s=WAIT_S, what="unfenced")
    print(f"  start-up to unfenced: {time.monotonic() - started:.1f} s")
    topics = _topics(args)
    wait_for(lambda: _alive(broker) and _polled_image(quorum, lambda i: _full_isr(i, topics)),
             timeout_s=WAIT_S, what="back in every ISR")  # fmt: skip
    print(f"  start-up to in the ISR of all {args.partitions}: {time.monotonic() - started:.1f} s")


def _alive(broker: BrokerProcess) -> bool:
    if not broker.alive:
        tail = broker.log_path.read_text(errors="replace").splitlines()[-5:]
        raise SystemExit("the broker died; the end of its log:\n" + "\n".join(tail))
    return True


def _controlled_shutdown(quorum: Quorum, broker: BrokerProcess) -> None:
    assert broker.process is not None
    started = time.monotonic()
    broker.process.terminate()
    moved = wait_for(lambda: _polled_image(quorum, _leads_nothing) and time.monotonic(),
                     timeout_s=WAIT_S, what="its leaderships moved")  # fmt: skip
    code = broker.stop(timeout_s=WAIT_S)
    print(f"controlled shutdown: leaderships moved within {moved - started:.1f} s (image polled "
          f"every {IMAGE_POLL_S:.0f} s), exit after {time.monotonic() - started:.1f} s "
          f"(exit code {code})")  # fmt: skip


def _measure(args: argparse.Namespace) -> None:
    """Every figure of the module docstring, on a fresh cluster."""
    with tempfile.TemporaryDirectory() as tmp, running_quorum(Path(tmp), size=3) as quorum:
        brokers = [
            make_broker(Path(tmp), quorum, node, heartbeat_interval_ms=500, session_timeout_ms=9000)
            for node in (1, 2, 3)
        ]
        try:
            for broker in brokers:
                broker.start()
            wait_for(lambda: len(quorum.image().cluster.unfenced_broker_ids()) == len(brokers),
                     timeout_s=120, what="every broker unfenced")  # fmt: skip
            print(f"created, every replica in its ISR: {_create(quorum, args):.1f} s")
            print(f"then known by every broker: {_known_by_brokers(brokers, args):.1f} s")
            print(f"one record to every partition: {_produce_everywhere(brokers, args):.1f} s")
            _controlled_shutdown(quorum, brokers[0])
            print("clean restart:")
            _start_up(quorum, brokers[0], args)
            _produce_everywhere(brokers, args)
            brokers[0].kill()
            print("kill -9, then:")
            _start_up(quorum, brokers[0], args)
        finally:
            for broker in brokers:
                broker.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=20_000)
    parser.add_argument("--per-topic", type=int, default=100)
    add_code_argument(parser)
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # figures as they come
    print(f"{args.partitions} partitions, RF 3 on 3 brokers: {args.partitions} replicas each")
    for _ in each_tree(trees_of(args)):
        _measure(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
