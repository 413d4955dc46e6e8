"""Benchmark of failover (issue 17 §6): kill -9 of a partition leader until the next acknowledged
acks=all write on each partition it led, with default settings (controllers: Kafka's 9 s
broker.session.timeout.ms; brokers: 2 s heartbeats; the client's defaults but linger.ms=0).

A killed broker's sockets close at once: the controller sees its BrokerSession stream end and
fences it, without waiting for the session timeout. For comparison the same run pauses leaders
(SIGSTOP, a silent failure: only the session timeout finds it), alternating with the kills.

Per failure it prints what the time is made of, each from the moment of the signal:
- fenced: the active controller's image has the broker fenced (polled every POLL_S);
- leader: every partition it led has another leader in that image;
- acked: the last of those partitions took an acknowledged write (the producer found the new
  leader: metadata refresh after NOT_LEADER_OR_FOLLOWER or a refused connection, then retry).

Run: `.venv/bin/python bench/failover.py [--kills 5] [--pauses 2]`. Three controllers and three
brokers on 127.0.0.1; figures depend on the machine, compare ratios taken in one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pykraft.broker.config import BrokerConfig  # noqa: E402
from pykraft.client import Producer  # noqa: E402
from tests.integration.cluster import (  # noqa: E402
    BROKER_IDS,
    create_topic,
    full_isr,
    make_broker,
    registrations,
    start_brokers,
    wait_until_brokers_know,
)
from tests.integration.controllers import Quorum, running_quorum  # noqa: E402
from tests.integration.processes import BrokerProcess, wait_for  # noqa: E402

TOPIC = "failover"
PARTITIONS = 3
POLL_S = 0.02  # how often the watcher reads the active controller's image
FAILOVER_WAIT_S = 60  # a partition that takes no write within this has failed the run
REJOIN_WAIT_S = 90  # the failed broker restarted and back in every ISR


@dataclass(frozen=True)
class Failover:
    """Milliseconds from the signal to each step (see the module docstring)."""

    how: str
    fenced_ms: float
    leader_ms: float
    acked_ms: float


class ImageWatcher:
    """Polls the active controller's image until `victim` is fenced and leads none of
    `partitions`; notes when each came true."""

    def __init__(self, quorum: Quorum, victim: int, partitions: list[int], start: float) -> None:
        self._quorum = quorum
        self._victim = victim
        self._partitions = partitions
        self._start = start
        self.fenced_ms: float | None = None
        self.leader_ms: float | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.perf_counter() + FAILOVER_WAIT_S
        while time.perf_counter() < deadline and self.leader_ms is None:
            image = self._quorum.image()
            elapsed_ms = (time.perf_counter() - self._start) * 1000
            registration = image.cluster.broker(self._victim)
            if self.fenced_ms is None and registration is not None and registration.fenced:
                self.fenced_ms = elapsed_ms
            led = image.topics.get_by_name(TOPIC)
            assert led is not None
            if all(led.partitions[p].leader != self._victim for p in self._partitions):
                self.leader_ms = elapsed_ms
            time.sleep(POLL_S)

    def join(self) -> tuple[float, float]:
        self._thread.join(timeout=FAILOVER_WAIT_S + 10)
        assert self.fenced_ms is not None and self.leader_ms is not None, "no failover seen"
        return self.fenced_ms, self.leader_ms


def first_acks_ms(producer: Producer, partitions: list[int], start: float) -> list[float]:
    """One acks=all write per partition, sent at once; ms from `start` to each one's ack."""
    futures = [producer.send(TOPIC, b"after", partition=p) for p in partitions]
    acked: list[float] = []
    for future in futures:
        future.result(timeout=FAILOVER_WAIT_S)
        acked.append((time.perf_counter() - start) * 1000)
    return acked


def fail_leader(
    quorum: Quorum, brokers: dict[int, BrokerProcess], partition: int, how: str
) -> Failover:
    """Kills (`how` "kill") or pauses ("pause") the leader of `partition`; measures; then brings
    the broker back (a paused one is killed first) and waits for it in every ISR."""
    led = registrations(quorum, TOPIC)
    victim = led[partition].leader
    partitions = [p for p, r in led.items() if r.leader == victim]
    address = ",".join(b.address for b in brokers.values())
    with Producer(bootstrap_servers=address, acks="all", linger_ms=0) as producer:
        for p in partitions:
            producer.send(TOPIC, b"warm", partition=p).result(timeout=30)
        fail: Callable[[], None] = brokers[victim].kill if how == "kill" else brokers[victim].pause
        start = time.perf_counter()
        fail()
        watcher = ImageWatcher(quorum, victim, partitions, start)
        acked_ms = max(first_acks_ms(producer, partitions, start))
        fenced_ms, leader_ms = watcher.join()
    brokers[victim].close()
    brokers[victim].start()
    wait_for(
        lambda: full_isr(quorum, TOPIC, PARTITIONS),
        timeout_s=REJOIN_WAIT_S,
        what="the failed broker back in every ISR",
    )
    wait_until_brokers_know(brokers, TOPIC, PARTITIONS)
    return Failover(how, fenced_ms, leader_ms, acked_ms)


def summary(runs: list[Failover], how: str) -> str:
    chosen = [run for run in runs if run.how == how]
    if not chosen:
        return f"{how}: no runs"

    def median(values: list[float]) -> str:
        return f"median {statistics.median(values):.0f} ms, max {max(values):.0f} ms"

    return (f"{how} -9 x{len(chosen)}" if how == "kill" else f"pause (SIGSTOP) x{len(chosen)}") + (
        f": fenced {median([r.fenced_ms for r in chosen])}; new leaders "
        f"{median([r.leader_ms for r in chosen])}; next acknowledged write "
        f"{median([r.acked_ms for r in chosen])}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--pauses", type=int, default=2)
    args = parser.parse_args()
    defaults = {f.name: f.default for f in fields(BrokerConfig) if isinstance(f.default, int)}
    plan = [  # alternating, so both kinds see the same machine
        how
        for index in range(max(args.kills, args.pauses))
        for how, count in (("kill", args.kills), ("pause", args.pauses))
        if index < count
    ]
    runs: list[Failover] = []
    with tempfile.TemporaryDirectory() as tmp, running_quorum(Path(tmp)) as quorum:
        brokers = {
            i: make_broker(
                Path(tmp),
                quorum,
                i,
                heartbeat_interval_ms=defaults["heartbeat_interval_ms"],
                session_timeout_ms=defaults["session_timeout_ms"],
            )
            for i in BROKER_IDS
        }
        try:
            start_brokers(quorum, brokers)
            create_topic(quorum, TOPIC, PARTITIONS, "--config", "min.insync.replicas=2")
            wait_until_brokers_know(brokers, TOPIC, PARTITIONS)
            for index, how in enumerate(plan):
                run = fail_leader(quorum, brokers, index % PARTITIONS, how)
                runs.append(run)
                print(
                    f"{how:5} #{index + 1}: fenced {run.fenced_ms:.0f} ms, new leaders "
                    f"{run.leader_ms:.0f} ms, next acknowledged write {run.acked_ms:.0f} ms",
                    flush=True,
                )
        finally:
            for broker in brokers.values():
                broker.close()
    print(summary(runs, "kill"))
    print(summary(runs, "pause"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
