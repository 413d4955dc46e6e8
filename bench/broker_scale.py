"""Benchmark of a broker holding many partitions (issue 18 §1): open descriptors, shutdown and
start-up time.

One controller and one broker process on 127.0.0.1; `--topics` topics of `--partitions`
partitions each with replication factor 1, so the broker holds topics x partitions replicas (the
default, 200 x 100, is 20,000). One record goes to every partition. Then it prints the broker's
open descriptors (/proc/PID/fd), the time of a controlled shutdown (SIGTERM to exit), the time of
a start-up (process start to unfenced, then to serving every partition) and the descriptors after
it; then one more record everywhere, kill -9 and the start-up again (every partition recovers
its active segment, which holds unflushed batches). A broker that dies (say of "Too many open
files") is reported as such.

`--code DIR` (bench/source_tree.py; repeatable) runs the whole of the above on a fresh cluster
of each tree given: the controller and the broker run it, for "before" figures in the same
conditions.

Run (it starts a cluster): `flock /tmp/pykraft-cluster.lock .venv/bin/python bench/broker_scale.py
[--topics 200] [--partitions 100] [--code DIR ...]`. Figures depend on the machine (2 shared cores
here); compare runs taken one after the other.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.source_tree import add_code_argument, each_tree, trees_of  # noqa: E402
from pykraft.client import AdminClient, NewTopic  # noqa: E402
from pykraft.proto import broker_pb2, common_pb2  # noqa: E402
from pykraft.proto.record_batch import build_batch  # noqa: E402
from tests.integration.cluster import make_broker  # noqa: E402
from tests.integration.controllers import Quorum, running_quorum  # noqa: E402
from tests.integration.processes import BrokerProcess, wait_for  # noqa: E402

TOPICS_PER_REQUEST_MAX = 20  # topics per CreateTopics, so no request carries too many records
WAIT_S = 900.0


def _descriptors(broker: BrokerProcess) -> int:
    assert broker.process is not None
    return len(os.listdir(f"/proc/{broker.process.pid}/fd"))


def _topics(args: argparse.Namespace) -> list[str]:
    return [f"t{number:04d}" for number in range(args.topics)]


def _serves_all(broker: BrokerProcess, topics: list[str], partitions: int) -> bool:
    """Every partition of `topics` has a leader in the broker's own metadata."""
    request = broker_pb2.MetadataRequest(topics=topics)
    found = broker.stub().Metadata(request, timeout=60).topics
    return all(
        topic.error_code == common_pb2.NONE
        and len(topic.partitions) == partitions
        and all(p.leader_id >= 0 for p in topic.partitions)
        for topic in found
    )


def _produce_once(broker: BrokerProcess, topic: str, partitions: int) -> Counter[str]:
    """One record to every partition of `topic`; the error names of those refused."""
    items = [
        broker_pb2.ProducePartition(partition=p, records=build_batch([(0, None, b"v")]))
        for p in range(partitions)
    ]
    request = broker_pb2.ProduceRequest(
        acks=1, timeout_ms=30_000, topics=[broker_pb2.ProduceTopic(topic=topic, partitions=items)]
    )
    response = broker.stub().Produce(request, timeout=60)
    return Counter(
        common_pb2.ErrorCode.Name(p.error_code)
        for p in response.topics[0].partitions
        if p.error_code != common_pb2.NONE
    )


def _produce_everywhere(broker: BrokerProcess, topics: list[str], partitions: int) -> None:
    """One record to every partition (again while the broker answers NOT_LEADER_OR_FOLLOWER:
    fenced, it lost its leaderships for a while); SystemExit saying how, if one fails else."""
    refused: Counter[str] = Counter()

    def produced(topic: str) -> bool:
        failed = _produce_once(broker, topic, partitions)
        refused.update(failed)
        if set(failed) - {"NOT_LEADER_OR_FOLLOWER"}:
            log = broker.log_path.read_text(errors="replace")
            raise SystemExit(
                f"produce failed: {dict(failed)}; the broker's log says 'Too many open files' "
                f"{log.count('Too many open files')} times; its end:\n{_log_tail(broker)}"
            )
        return not failed

    for topic in topics:
        wait_for(functools.partial(produced, topic), timeout_s=WAIT_S, what=f"{topic} written")
    if refused:
        print(f"produce: refused first {dict(refused)} (the broker was fenced meanwhile)")


def _create(quorum: Quorum, broker: BrokerProcess, args: argparse.Namespace) -> float:
    started = time.monotonic()
    topics = _topics(args)
    with AdminClient(quorum.bootstrap) as admin:
        for first in range(0, len(topics), TOPICS_PER_REQUEST_MAX):
            chunk = topics[first : first + TOPICS_PER_REQUEST_MAX]
            admin.create_topics([NewTopic(name, args.partitions, 1) for name in chunk])
    wait_for(lambda: _alive_and(broker, lambda: _serves_all(broker, topics, args.partitions)),
             timeout_s=WAIT_S, what="every partition served")  # fmt: skip
    return time.monotonic() - started


def _alive_and(broker: BrokerProcess, condition: Callable[[], bool]) -> bool:
    """`condition()`, after checking the broker still runs (SystemExit with its log if not)."""
    if not broker.alive:
        raise SystemExit(f"the broker died; the end of its log:\n{_log_tail(broker)}")
    return condition()


def _log_tail(broker: BrokerProcess) -> str:
    return "\n".join(broker.log_path.read_text(errors="replace").splitlines()[-5:])


def _restart(
    quorum: Quorum, broker: BrokerProcess, args: argparse.Namespace, *, kill: bool
) -> None:
    """Stops the broker (SIGTERM, timed; or kill -9) and times its start."""
    started = time.monotonic()
    if kill:
        broker.kill()
        wait_for(lambda: 1 not in quorum.image().cluster.unfenced_broker_ids(),
                 timeout_s=60, what="the killed broker fenced")  # fmt: skip
        print("kill -9 (then fenced by the controller), then:")
    else:
        code = broker.stop(timeout_s=WAIT_S)
        print(f"controlled shutdown: {time.monotonic() - started:.1f} s (exit code {code})")
    started = time.monotonic()
    broker.start()
    unfenced = wait_for(
        lambda: _alive_and(broker, lambda: 1 in quorum.image().cluster.unfenced_broker_ids()),
        timeout_s=WAIT_S,
        what="the broker unfenced",
    )
    print(f"start-up to unfenced: {time.monotonic() - started:.1f} s ({unfenced})")
    wait_for(
        lambda: _alive_and(broker, lambda: _serves_all(broker, _topics(args), args.partitions)),
        timeout_s=WAIT_S,
        what="every partition served",
    )
    print(f"start-up to serving every partition: {time.monotonic() - started:.1f} s")


def _measure(args: argparse.Namespace) -> None:
    """Every figure of the module docstring, on a fresh cluster."""
    with tempfile.TemporaryDirectory() as tmp, running_quorum(Path(tmp), size=1) as quorum:
        broker = make_broker(Path(tmp), quorum, 1)
        try:
            broker.start()
            wait_for(lambda: 1 in quorum.image().cluster.unfenced_broker_ids(),
                     timeout_s=60, what="the broker unfenced")  # fmt: skip
            print(f"created and served in {_create(quorum, broker, args):.1f} s")
            _produce_everywhere(broker, _topics(args), args.partitions)
            print(f"open descriptors: {_descriptors(broker)}")
            _restart(quorum, broker, args, kill=False)
            print(f"open descriptors after the restart: {_descriptors(broker)}")
            _produce_everywhere(broker, _topics(args), args.partitions)  # unflushed everywhere
            _restart(quorum, broker, args, kill=True)
        finally:
            broker.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=100)
    add_code_argument(parser)
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # figures as they come
    replicas = args.topics * args.partitions
    print(f"{replicas} replicas on one broker ({args.topics} topics x {args.partitions}, RF 1)")
    for _ in each_tree(trees_of(args)):
        _measure(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
