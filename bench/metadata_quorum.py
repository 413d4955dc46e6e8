"""Benchmark of the controller quorum: three real controller processes on 127.0.0.1.

Prints:
- metadata commit throughput: operations/s and records/s, one client and many concurrent clients
  (IncrementalAlterConfigs, one record per operation; CreateTopics of 100 partitions, 101 records);
- failover time: kill -9 of the active controller until the next committed write, several times;
- the time for a MetadataFetch of the whole image with 100 topics x 100 partitions (as a new broker
  would: from offset -1 through the retained log, and from a snapshot).

Run: `make bench` (or `.venv/bin/python bench/metadata_quorum.py [--clients 8] [--seconds 5]`).
Figures depend on the machine; compare ratios taken in one run.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Stand-ins heartbeat as often as real brokers do by default (Kafka's broker.heartbeat.interval.ms)
# once unfenced: at 30 of them, the tests' 200 ms interval was 150 requests/s competing with the
# controllers for the 2 cores.
BROKER_HEARTBEAT_INTERVAL_S = 2.0
sys.path.insert(0, str(ROOT))

from pykraft.client import AdminClient  # noqa: E402
from pykraft.proto import admin_pb2, controller_pb2  # noqa: E402
from tests.integration.controllers import Quorum, StandInBroker, fetch_image, make_quorum  # noqa: E402
from tests.integration.processes import wait_for  # noqa: E402


def alter_config_op(admin: AdminClient, topic: str) -> Callable[[int], int]:
    def op(i: int) -> int:
        admin.alter_configs("topic", topic, set={"retention.ms": str(60_000 + i)})
        return 1

    return op


def create_topic_op(admin: AdminClient, prefix: str, partitions: int) -> Callable[[int], int]:
    def op(i: int) -> int:
        admin.create_topic(f"{prefix}-{i}", partitions, 3)
        return 1 + partitions

    return op


def throughput(op: Callable[[int], int], *, clients: int, seconds: float) -> tuple[float, float]:
    """Runs `op` from `clients` threads for `seconds`; returns (operations/s, records/s)."""
    counts = [0] * clients
    records = [0] * clients
    stop = threading.Event()

    def worker(index: int) -> None:
        i = index
        while not stop.is_set():
            records[index] += op(i)
            counts[index] += 1
            i += clients

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return sum(counts) / elapsed, sum(records) / elapsed


def failover_ms(
    quorum: Quorum, admin: AdminClient, rounds: int, *, rejoin_timeout_s: float = 30
) -> list[float]:
    """Kills the active controller `rounds` times; the ms from each kill to the next write the
    client saw committed. Prints where each went: until a survivor led the next term and until
    its LEADER_CHANGE applied (from the survivors' logs), then the client's retries; and how
    long the killed controller took to restart and catch up (at most `rejoin_timeout_s`)."""
    results = []
    for round_index in range(rounds):
        active = quorum.wait_active()
        active.kill()
        killed = time.perf_counter()
        killed_wall_s = time.time()
        create = create_topic_op(admin, f"failover{round_index}", 1)
        wait_for(partial(_succeeds, create), timeout_s=30, what="a write after failover")
        results.append((time.perf_counter() - killed) * 1000)
        survivors = [c.log_path for c in quorum.controllers if c is not active]
        elected_ms, active_ms = (
            _logged_after_ms(survivors, killed_wall_s, phrase)
            for phrase in (" leads term ", " is the active controller ")
        )
        print(
            f"  failover {round_index + 1}: a survivor leads at {elected_ms:.0f} ms, is active "
            f"at {active_ms:.0f} ms, the client's write committed at {results[-1]:.0f} ms",
            flush=True,
        )
        restarted = time.perf_counter()
        active.start()
        what = "the killed controller rejoining"
        wait_for(lambda: _caught_up(quorum), timeout_s=rejoin_timeout_s, what=what)
        print(f"  restarted and caught up in {time.perf_counter() - restarted:.1f} s", flush=True)
    return results


def _logged_after_ms(logs: list[Path], since_wall_s: float, phrase: str) -> float:
    """Ms from `since_wall_s` to the first line of `logs` after it that contains `phrase`
    (NaN when none does); log lines carry the local wall clock to the millisecond."""
    times = []
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            if phrase in line:
                stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                if stamp >= since_wall_s:
                    times.append(stamp)
    return (min(times) - since_wall_s) * 1000 if times else math.nan


def _succeeds(op: Callable[[int], int]) -> bool:
    try:
        op(0)
        return True
    except Exception:
        return False


def _caught_up(quorum: Quorum) -> bool:
    response = quorum.admin(quorum.wait_active().address).DescribeQuorum(
        admin_pb2.DescribeQuorumRequest(), timeout=2
    )
    return all(v.status != "Unreachable" and v.lag == 0 for v in response.voters)


def fetch_whole_image(quorum: Quorum) -> tuple[float, float, int, int]:
    """A new broker's first fetch: (ms for the response, ms to rebuild the image, bytes, records).

    The bench keeps a short retained tail, so a fetch from offset -1 is answered with a snapshot.
    """
    stub = quorum.controller_stub(quorum.wait_active().address)
    request = controller_pb2.MetadataFetchRequest(after_offset=-1, max_wait_ms=0)
    started = time.perf_counter()
    response = stub.MetadataFetch(request, timeout=30)
    response_ms = (time.perf_counter() - started) * 1000
    assert response.HasField("snapshot"), "expected a snapshot for a fetch from -1"
    started = time.perf_counter()
    image = fetch_image(stub)
    rebuild_ms = (time.perf_counter() - started) * 1000
    return response_ms, rebuild_ms, response.ByteSize(), len(image.write())


@contextlib.contextmanager
def quorum_with_brokers(
    tmp: Path, extra_args: tuple[str, ...] = (), *, broker_count: int = 3
) -> Iterator[tuple[Quorum, list[StandInBroker]]]:
    """Three controller processes (started with `extra_args`) with an active one, and
    `broker_count` stand-in brokers (ids from 1, in three racks) registered and heartbeating,
    until the block ends."""
    quorum = make_quorum(tmp, extra_args=extra_args)
    quorum.start()
    try:
        quorum.wait_active(timeout_s=30)
        ids = range(1, broker_count + 1)
        brokers = [StandInBroker(quorum, i, rack=f"r{(i - 1) % 3 + 1}") for i in ids]
        for broker in brokers:
            broker.start()  # unfenced by its first heartbeats, at the tests' 200 ms interval
            broker.heartbeat_interval_s = BROKER_HEARTBEAT_INTERVAL_S
        try:
            yield quorum, brokers
        finally:
            for broker in brokers:
                broker.pause()
    finally:
        quorum.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--failovers", type=int, default=3)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        quorum_with_brokers(Path(tmp), ("--metadata-tail-records-max", "1000")) as (quorum, _),
        AdminClient(quorum.bootstrap) as admin,
    ):
        _report(quorum, admin, args)
    return 0


def _report(quorum: Quorum, admin: AdminClient, args: argparse.Namespace) -> None:
    started = time.perf_counter()
    create = create_topic_op(admin, "wide", 100)
    for i in range(100):
        create(i)
    elapsed = time.perf_counter() - started
    print(
        f"metadata commit throughput, one client creating 100 topics x 100 partitions: "
        f"{100 / elapsed:.0f} ops/s, {100 * 101 / elapsed:.0f} records/s"
    )
    response_ms, rebuild_ms, size, record_count = fetch_whole_image(quorum)
    print(
        f"MetadataFetch of the whole image (100 topics x 100 partitions, {record_count} records, "
        f"{size / 1024:.0f} KiB snapshot): {response_ms:.0f} ms for the response, "
        f"{rebuild_ms:.0f} ms including decoding and rebuilding the image"
    )

    create_topic_op(admin, "config-target", 1)(0)
    for clients in (1, args.clients):
        ops, records = throughput(
            alter_config_op(admin, "config-target-0"), clients=clients, seconds=args.seconds
        )
        print(
            f"metadata commit throughput, alter config (1 record/op), {clients} client(s): "
            f"{ops:.0f} ops/s, {records:.0f} records/s"
        )
    ops, records = throughput(
        create_topic_op(admin, "many", 100), clients=args.clients, seconds=args.seconds
    )
    print(
        f"metadata commit throughput, create topic x100 partitions, {args.clients} clients: "
        f"{ops:.0f} ops/s, {records:.0f} records/s"
    )

    times = failover_ms(quorum, admin, args.failovers)
    print(
        f"failover (kill -9 of the active until the next committed write), {len(times)} runs: "
        f"median {statistics.median(times):.0f} ms, max {max(times):.0f} ms, "
        f"all {[round(t) for t in times]}"
    )


if __name__ == "__main__":
    sys.exit(main())
