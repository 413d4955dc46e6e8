"""Benchmark of consumer groups: three controllers and three brokers on 127.0.0.1, a topic of 6
partitions (replication factor 3), members as separate processes (so they do not share a GIL).

Prints:
- the time from kill -9 of a member to each of its partitions being consumed again by another
  member, beside the session timeout that bounds it from below (the coordinator notices a
  silent member only when its session runs out);
- the time a new member takes from `subscribe` to its first record, while three members consume;
- records/s of one consumer reading N records, and of a group of three reading the same N.

Run: `.venv/bin/python bench/groups.py [--records 300000] [--session-timeout-ms 10000]`.
Figures depend on the machine (2 cores here, shared by 9 processes): compare ratios of one run.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized, SynchronizedArray
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pykraft.client import Consumer, Producer, TopicPartition  # noqa: E402
from tests.integration.cluster import running_cluster  # noqa: E402
from tests.integration.processes import wait_for  # noqa: E402

TOPIC = "bench-groups"
PARTITIONS = 6
VALUE = b"v" * 100
POLL_RECORDS_MAX = 500
# A partition read within this long counts as being read (records are produced every 10 ms).
RECENT_S = 1.0
SPAWN = mp.get_context("spawn")


@dataclass
class Worker:
    """A member process and what it shares with the benchmark: records read and the wall time
    of the last one per partition, and when it subscribed and read its first record."""

    process: Any
    counts: SynchronizedArray[int]
    last_seen: SynchronizedArray[float]
    subscribed_at: Synchronized[float]
    first_record_at: Synchronized[float]

    @property
    def total(self) -> int:
        return sum(self.counts[:])


def _member(
    bootstrap: str,
    group: str,
    counts: SynchronizedArray[int],
    last_seen: SynchronizedArray[float],
    subscribed_at: Synchronized[float],
    first_record_at: Synchronized[float],
) -> None:
    with Consumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        max_poll_records=POLL_RECORDS_MAX,
    ) as consumer:
        consumer.subscribe([TOPIC])
        subscribed_at.value = time.time()
        while True:
            records = consumer.poll(timeout_ms=200)
            if not records:
                continue
            now = time.time()
            if not first_record_at.value:
                first_record_at.value = now
            for record in records:
                counts[record.partition] += 1
                last_seen[record.partition] = now


def start_worker(bootstrap: str, group: str) -> Worker:
    counts = SPAWN.Array("q", PARTITIONS, lock=False)
    last_seen = SPAWN.Array("d", PARTITIONS, lock=False)
    subscribed_at = SPAWN.Value("d", 0.0, lock=False)
    first_record_at = SPAWN.Value("d", 0.0, lock=False)
    process = SPAWN.Process(
        target=_member,
        args=(bootstrap, group, counts, last_seen, subscribed_at, first_record_at),
        daemon=True,
    )
    process.start()
    return Worker(process, counts, last_seen, subscribed_at, first_record_at)


def stop(workers: list[Worker]) -> None:
    for worker in workers:
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join()


def produce(bootstrap: str, records: int) -> None:
    with Producer(bootstrap_servers=bootstrap, acks="1", linger_ms=5) as producer:
        for _ in range(records):
            producer.send(TOPIC, VALUE)
        producer.flush(timeout=600)


def records_in_topic(bootstrap: str) -> int:
    with Consumer(bootstrap_servers=bootstrap) as consumer:
        partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        return sum(consumer.end_offsets(partitions).values())


def throughput(bootstrap: str, group: str, members: int, records: int) -> float:
    """records/s of `members` processes reading `records` from their subscription on."""
    workers = [start_worker(bootstrap, group) for _ in range(members)]
    try:
        wait_for(
            lambda: all(w.subscribed_at.value for w in workers), timeout_s=60, what="subscribed"
        )
        started = min(w.subscribed_at.value for w in workers)
        wait_for(
            lambda: sum(w.total for w in workers) >= records, timeout_s=900, what="all records"
        )
        return records / (time.time() - started)
    finally:
        stop(workers)


def recent_partitions(worker: Worker) -> list[int]:
    """The partitions `worker` read in the last RECENT_S seconds (records keep coming)."""
    now = time.time()
    return [p for p, t in enumerate(worker.last_seen[:]) if t > now - RECENT_S]


def failover_and_join(bootstrap: str) -> tuple[list[float], float]:
    """(ms from kill -9 of a member to each orphaned partition read again, ms from a new
    member's subscribe to its first record)."""
    stopping = threading.Event()

    def keep_producing() -> None:
        with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
            while not stopping.is_set():
                for partition in range(PARTITIONS):
                    producer.send(TOPIC, VALUE, partition=partition)
                time.sleep(0.01)

    feeder = threading.Thread(target=keep_producing, daemon=True)
    feeder.start()
    workers = [start_worker(bootstrap, "bench-failover") for _ in range(3)]
    try:
        wait_for(
            lambda: all(len(recent_partitions(w)) == 2 for w in workers),
            timeout_s=120,
            what="two partitions read by each member",
        )
        newcomer = start_worker(bootstrap, "bench-failover")
        wait_for(lambda: newcomer.first_record_at.value, timeout_s=120, what="newcomer reads")
        join_ms = (newcomer.first_record_at.value - newcomer.subscribed_at.value) * 1000
        workers.append(newcomer)
        time.sleep(2)
        victim = max(workers, key=lambda w: len(recent_partitions(w)))
        orphaned = recent_partitions(victim)
        victim.process.kill()
        killed_at = time.time()
        survivors = [w for w in workers if w is not victim]

        def read_again(partition: int) -> float | None:
            seen = max(w.last_seen[partition] for w in survivors)
            return seen if seen > killed_at else None

        delays_ms = []
        for partition in orphaned:
            seen = wait_for(
                functools.partial(read_again, partition), timeout_s=180, what="takeover"
            )
            delays_ms.append((seen - killed_at) * 1000)
        return delays_ms, join_ms
    finally:
        stopping.set()
        feeder.join(timeout=60)
        stop(workers)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=1_000)
    args = parser.parse_args()
    overrides = (
        "--override", f"group.consumer.session.timeout.ms={args.session_timeout_ms}",
        "--override", f"group.consumer.heartbeat.interval.ms={args.heartbeat_interval_ms}",
    )  # fmt: skip
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_cluster(Path(tmp), topic=TOPIC, partitions=PARTITIONS, broker_args=overrides) as (
            _,
            brokers,
        ),
    ):
        bootstrap = ",".join(b.address for b in brokers.values())
        delays_ms, join_ms = failover_and_join(bootstrap)
        print(
            f"member kill -9 -> its {len(delays_ms)} partitions read again: "
            f"{min(delays_ms):,.0f}-{max(delays_ms):,.0f} ms "
            f"(session timeout {args.session_timeout_ms:,} ms, heartbeat "
            f"{args.heartbeat_interval_ms:,} ms)"
        )
        print(f"new member, subscribe -> first record: {join_ms:,.0f} ms")
        produce(bootstrap, args.records)
        total = records_in_topic(bootstrap)
        solo = throughput(bootstrap, "bench-solo", 1, total)
        trio = throughput(bootstrap, "bench-trio", 3, total)
        print(
            f"{total:,} records: one consumer {solo:,.0f} records/s; "
            f"a group of three {trio:,.0f} records/s"
        )
        print(f"group of three / one consumer: {trio / solo:.2f} (cores: {os.cpu_count()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
