"""Benchmark of `pykraft mirror` (issue 15 §2.7): one mirror process between two local clusters
(one controller and one broker each, `tests/integration/mirror_clusters.py`), a topic of 6
partitions, records of 100 bytes.

Prints:
- throughput: N records already on the source, copied by a mirror started afterwards; records/s
  from the first record on the target to the last (the mirror's start-up is left out), and the
  mirror process's CPU microseconds per record;
- lag at a fixed produce rate (default 10,000 records/s) with the mirror running and caught up:
  the rate reached, the records not yet on the target sampled every 200 ms (mean, max), and the
  time from a record's send on the source to its arrival through a consumer of the target
  (p50, p99, max; the send time is in the value).

Run: `.venv/bin/python bench/mirror_throughput.py [--records 200000] [--rate 10000]
[--seconds 20]`, under `flock /tmp/pykraft-cluster.lock` where clusters share the machine.
Figures depend on the machine: the clusters, the mirror and this process share its cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import VALUE_BYTES, percentile  # noqa: E402
from pykraft.client import AdminClient, Consumer, Producer, TopicPartition  # noqa: E402
from pykraft.client.admin import OffsetSpec  # noqa: E402
from tests.integration.mirror_clusters import (  # noqa: E402
    MirrorProcess,
    end_offsets,
    running_mirror,
    small_cluster,
)
from tests.integration.processes import wait_for  # noqa: E402

TOPIC = "bench"
REMOTE = f"source.{TOPIC}"
PARTITIONS = 6
STAMP = struct.Struct(">q")  # the send time (time.time_ns) heads each lag-run value
LAG_SAMPLE_S = 0.2
COPY_TIMEOUT_S = 600


def _total(bootstrap: str, topic: str) -> int:
    return sum(end_offsets(bootstrap, topic).values())


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fill(bootstrap: str, records: int) -> None:
    value = b"x" * VALUE_BYTES
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=65536) as producer:
        for i in range(records):
            producer.send(TOPIC, value, key=b"%d" % i)
        producer.flush(timeout=600)


def throughput(target: str, mirror: MirrorProcess, records: int) -> None:
    """Times the running mirror copying `records` already on the source."""
    assert mirror.process is not None
    pid = mirror.process.pid
    first = wait_for(lambda: _total(target, REMOTE), timeout_s=COPY_TIMEOUT_S, what="a copy")
    started, cpu_started = time.perf_counter(), _cpu_s(pid)
    wait_for(
        lambda: _total(target, REMOTE) >= records,
        timeout_s=COPY_TIMEOUT_S,
        what="every record copied",
    )
    seconds, cpu = time.perf_counter() - started, _cpu_s(pid) - cpu_started
    copied = records - first
    print(
        f"mirror throughput, {records} records of {VALUE_BYTES} B, {PARTITIONS} partitions: "
        f"{copied / seconds:.0f} records/s ({copied} records in {seconds:.1f} s after the "
        f"first), mirror CPU {cpu / copied * 1e6:.1f} us/record"
    )


def lag(source: str, target: str, rate: int, seconds: float) -> None:
    """Produces at `rate` for `seconds` while sampling the lag in records and timing arrivals."""
    total = int(rate * seconds)
    arrivals_ms: list[float] = []
    samples: list[int] = []
    done = threading.Event()
    tps = [TopicPartition(REMOTE, p) for p in range(PARTITIONS)]
    with Consumer(bootstrap_servers=target, fetch_max_wait_ms=100) as consumer:
        consumer.assign(tps)
        consumer.seek_to_end(tps)
        for tp in tps:
            consumer.position(tp)

        def read() -> None:
            while not done.is_set() and len(arrivals_ms) < total:
                for record in consumer.poll(100):
                    (sent_ns,) = STAMP.unpack_from(record.value or b"")
                    arrivals_ms.append((time.time_ns() - sent_ns) / 1e6)

        def sample() -> None:
            with AdminClient(source) as source_admin, AdminClient(target) as target_admin:
                while not done.wait(LAG_SAMPLE_S):
                    behind = _ends(source_admin, TOPIC) - _ends(target_admin, REMOTE)
                    samples.append(max(0, behind))

        threads = [threading.Thread(target=f, daemon=True) for f in (read, sample)]
        for thread in threads:
            thread.start()
        reached = _paced_produce(source, rate, total)
        wait_for(lambda: len(arrivals_ms) >= total, timeout_s=120, what="every record mirrored")
        done.set()
        for thread in threads:
            thread.join(timeout=30)
    print(
        f"mirror lag at {rate} records/s (reached {reached:.0f}/s) for {seconds:g} s: "
        f"records behind mean {statistics.mean(samples):.0f}, max {max(samples)} "
        f"(sampled every {LAG_SAMPLE_S * 1000:.0f} ms); source send to target consumer "
        f"p50 {percentile(arrivals_ms, 0.5):.0f} ms, p99 {percentile(arrivals_ms, 0.99):.0f} ms, "
        f"max {max(arrivals_ms):.0f} ms"
    )


def _ends(admin: AdminClient, topic: str) -> int:
    latest: OffsetSpec = "latest"
    tps = dict.fromkeys((TopicPartition(topic, p) for p in range(PARTITIONS)), latest)
    return sum(r.offset for r in admin.list_offsets(tps).values())


def _paced_produce(bootstrap: str, rate: int, total: int) -> float:
    padding = b"p" * (VALUE_BYTES - STAMP.size)
    with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as producer:
        started = time.perf_counter()
        for i in range(total):
            ahead_s = started + i / rate - time.perf_counter()
            if ahead_s > 0:
                time.sleep(ahead_s)
            producer.send(TOPIC, STAMP.pack(time.time_ns()) + padding, key=b"%d" % i)
        reached = total / (time.perf_counter() - started)
        producer.flush(timeout=60)
    return reached


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        base = Path(tmp)
        source = stack.enter_context(small_cluster(base / "source")).bootstrap
        target = stack.enter_context(small_cluster(base / "target")).bootstrap
        with AdminClient(source) as admin:
            admin.create_topic(TOPIC, PARTITIONS, 1)
        fill(source, args.records)
        mirror = MirrorProcess(base / "mirror", source, target, topics=TOPIC, properties={})
        with running_mirror(mirror):
            throughput(target, mirror, args.records)
            lag(source, target, args.rate, args.seconds)
            assert mirror.stop() == 0, mirror.log()
    return 0


if __name__ == "__main__":
    sys.exit(main())
