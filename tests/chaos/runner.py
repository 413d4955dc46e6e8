"""One chaos run: a cluster (each node in its own network namespace when possible), the
workload, the nemesis, healing, a final read, the replicas compared on disk, and the checker.

    python -m tests.chaos.runner --seconds 600 --seeds 3        # make chaos SECONDS=600 SEEDS=3
    PYKRAFT_SEED=42 python -m tests.chaos.runner --seconds 60   # replays seed 42

Each run prints its seed and writes, under build/chaos/seed-<seed>/: history.jsonl,
summary.json, timeline.png and the nodes' and clients' logs. Start it under
`flock /tmp/pykraft-cluster.lock` (one cluster at a time on this machine).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pykraft.client import AdminClient, Consumer, KafkaError, TopicPartition
from pykraft.proto.record_batch import decode_batch, iter_batches
from tests.chaos import checker, history, timeline
from tests.chaos.nemesis import FAULT_KINDS, PARTITION_KINDS, Cluster, Nemesis, schedule
from tests.integration.cluster import BROKER_IDS, create_topic, make_broker, start_brokers
from tests.integration.controllers import make_quorum
from tests.integration.processes import BrokerProcess, wait_for
from tests.netns import TestNetwork, unavailable_reason

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "chaos"
PARTITIONS = 4
GROUP = "chaos"
# name, acks, idempotent: the producers of the workload.
PRODUCERS = (("p0", "all", 1), ("p1", "all", 1), ("p2", "all", 0), ("p3", "1", 0))
CONSUMERS = ("c0", "c1")
READERS = ("r0", "r1")
SEND_RATE = 15.0  # per producer, per second
BROKER_ARGS = (
    "--override", "group.consumer.session.timeout.ms=6000",
    "--override", "group.consumer.heartbeat.interval.ms=500",
    "--override", "offsets.topic.num.partitions=3",
    "--replica-lag-time-max-ms", "5000",
)  # fmt: skip
CONTROLLER_ARGS = ("--broker-session-timeout-ms", "3000")
STOP_TIMEOUT_S = 45.0


@dataclass
class RunConfig:
    seed: int
    seconds: float
    kinds: tuple[str, ...] = FAULT_KINDS
    out_dir: Path | None = None

    @property
    def directory(self) -> Path:
        return self.out_dir or ROOT / "build" / "chaos" / f"seed-{self.seed}"


@dataclass
class Workload:
    directory: Path
    bootstrap: str
    controllers: str
    seed: int
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def spawn(self, role: str, name: str, *extra: str) -> None:
        command = [
            sys.executable, "-m", "tests.chaos.workload", role, "--name", name,
            "--history", str(self.directory / f"{name}.jsonl"), "--bootstrap", self.bootstrap,
            "--controllers", self.controllers, "--topic", TOPIC,
            "--partitions", str(PARTITIONS), "--group", GROUP, *extra,
        ]  # fmt: skip
        with open(self.directory / f"{name}.log", "ab") as log:
            self.processes[name] = subprocess.Popen(
                command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
            )

    def start(self) -> None:
        for index, (name, acks, idempotent) in enumerate(PRODUCERS):
            self.spawn(
                "producer", name, "--acks", acks, "--idempotent", str(idempotent),
                "--rate", str(SEND_RATE), "--seed", str(self.seed * 100 + index),
            )  # fmt: skip
        for name in CONSUMERS:
            self.spawn("consumer", name)
        for name in READERS:
            self.spawn("reader", name)
        self.spawn("monitor", "m0")

    def stop(self, names: list[str]) -> list[str]:
        """SIGTERM, then each waited for; returns those that had to be killed."""
        for name in names:
            self.processes[name].send_signal(signal.SIGTERM)
        killed = []
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for name in names:
            try:
                self.processes[name].wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.processes[name].kill()
                self.processes[name].wait(timeout=10)
                killed.append(name)
        return killed

    def kill_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


@contextmanager
def chaos_cluster(directory: Path, network: TestNetwork | None) -> Iterator[Cluster]:
    """Three controllers, three brokers and the chaos topic (RF 3, min.insync.replicas=2)."""
    hosts = {} if network is None else network.addresses
    quorum = make_quorum(
        directory,
        extra_args=CONTROLLER_ARGS,
        hosts={i: hosts[f"c{i}"] for i in (1, 2, 3)} if network else None,
    )
    brokers = {
        i: make_broker(directory, quorum, i, host=hosts.get(f"b{i}", "127.0.0.1"))
        for i in BROKER_IDS
    }
    if network is not None:
        for controller in quorum.controllers:
            controller.launcher = network.launcher(f"c{controller.node_id}")
        for broker in brokers.values():
            broker.launcher = network.launcher(f"b{broker.node_id}")
    try:
        quorum.start()
        quorum.wait_active(timeout_s=30)
        for broker in brokers.values():
            broker.args += list(BROKER_ARGS)
        start_brokers(quorum, brokers, timeout_s=40)
        create_topic(quorum, TOPIC, PARTITIONS, "--config", "min.insync.replicas=2")
        yield Cluster(quorum, brokers, TOPIC, PARTITIONS, network)
    finally:
        for broker in brokers.values():
            broker.resume()
            broker.close()
        quorum.close()


def final_read(bootstrap: str, out: history.HistoryWriter) -> dict[int, int]:
    """Reads every partition from the beginning to its high-water mark (returned). The
    records go into the history only once the read is complete, so that a read cut short
    never makes records look unseen."""
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    read: list[tuple[int, int, str]] = []
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends = {tp.partition: offset for tp, offset in consumer.end_offsets(tps).items()}

        def done() -> bool:
            polled = consumer.poll(timeout_ms=500)
            read.extend((r.partition, r.offset, (r.value or b"").decode()) for r in polled)
            return all(consumer.position(tp) >= ends[tp.partition] for tp in tps)

        wait_for(done, timeout_s=60, what="the final read to reach every high-water mark")
    finally:
        consumer.close()
    for start in range(0, len(read), 1000):
        out.write("ok", "poll", records=read[start : start + 1000], final=True)
    return ends


def read_replicas(
    brokers: dict[int, BrokerProcess], ends: dict[int, int], out: history.HistoryWriter
) -> dict[int, dict[int, list[checker.Batch]]]:
    """Each stopped broker's batches of the topic, from its segment files; the records below
    the high-water mark go into the history as `replica` reads."""
    logs: dict[int, dict[int, list[checker.Batch]]] = {}
    for broker_id, broker in brokers.items():
        logs[broker_id] = {}
        for partition in range(PARTITIONS):
            directory = broker.data_dir / f"{TOPIC}-{partition}"
            data = b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))
            batches: list[checker.Batch] = []
            records = []
            for position, header in iter_batches(data, verify=False):
                end = position + header.size_bytes
                batches.append((header.base_offset, header.last_offset, data[position:end]))
                for record in decode_batch(data, position, verify=False):
                    if record.offset < ends.get(partition, 0):
                        value = (record.value or b"").decode()
                        records.append((partition, record.offset, value))
            logs[broker_id][partition] = batches
            out.process = f"replica-{broker_id}"
            out.write("ok", "replica", records=records)
    return logs


def run(config: RunConfig) -> dict[str, Any]:
    """One run; returns its summary (also written to summary.json)."""
    directory = config.directory
    print(f"chaos: seed {config.seed} ({config.seconds:.0f} s) -> {directory}", flush=True)
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    kinds = config.kinds
    reason = unavailable_reason() if set(kinds) & set(PARTITION_KINDS) else None
    if reason is not None:
        print(f"chaos: partition faults skipped: {reason}", flush=True)
        kinds = tuple(k for k in kinds if k not in PARTITION_KINDS)
    network = None
    if reason is None and unavailable_reason() is None:
        network = TestNetwork(["c1", "c2", "c3", "b1", "b2", "b3"])
        network.create()
    faults = schedule(config.seed, kinds, config.seconds)
    summary: dict[str, Any] = {
        "seed": config.seed, "seconds": config.seconds, "kinds": list(kinds),
        "skipped_partitions": reason, "network_namespaces": network is not None,
        "schedule": [f.__dict__ for f in faults],
    }  # fmt: skip
    try:
        with chaos_cluster(directory, network) as cluster:
            summary.update(_exercise(cluster, config, faults, directory))
    finally:
        if network is not None:
            network.destroy()
    ops = history.load(sorted(directory.glob("*.jsonl")))
    history.write_all(directory / "history.jsonl", ops)
    result = checker.check(ops, summary.pop("replica_divergence"))
    summary["check"] = result.summary()
    summary["valid"] = result.valid and not summary["problems"]
    summary["fault_counts"] = dict(Counter(w["kind"] for w in summary["faults"]))
    (directory / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    timeline.draw(ops, summary["faults"], summary["began"], directory / "timeline.png")
    _print_summary(summary)
    return summary


def _exercise(
    cluster: Cluster, config: RunConfig, faults: list[Any], directory: Path
) -> dict[str, Any]:
    bootstrap = ",".join(b.address for b in cluster.brokers.values())
    workload = Workload(directory, bootstrap, cluster.quorum.bootstrap, config.seed)
    nemesis = Nemesis(cluster, faults)
    problems: list[str] = []
    began = time.time()
    try:
        workload.start()
        nemesis.start()
        nemesis.join(timeout_s=config.seconds + 120)
        # The workload runs for the whole run, also after the schedule's last fault.
        time.sleep(max(0.0, began + config.seconds - time.time()))
        problems += nemesis.problems + cluster.recover()
        producers = [name for name, _, _ in PRODUCERS]
        problems += [f"{n} did not stop" for n in workload.stop(producers)]
        problems += cluster.recover()
        _wait_consumers_caught_up(cluster, bootstrap)
        others = [n for n in workload.processes if n not in producers]
        problems += [f"{n} did not stop" for n in workload.stop(others)]
    finally:
        workload.kill_all()
    final = history.HistoryWriter(directory / "final.jsonl", "final")
    ends: dict[int, int] = {}
    try:
        ends = final_read(bootstrap, final)
    except (AssertionError, KafkaError) as error:
        problems.append(f"final read: {error}")
    try:
        for broker in cluster.brokers.values():
            try:
                broker.stop(timeout_s=30)
            except AssertionError as error:
                problems.append(f"stopping broker {broker.node_id}: {error}")
        logs = read_replicas(cluster.brokers, ends, final)
    finally:
        final.close()
    return {
        "began": began,
        "faults": nemesis.windows,
        "problems": problems,
        "high_watermarks": ends,
        "replica_divergence": checker.check_replicas(logs, ends),
    }


def _wait_consumers_caught_up(cluster: Cluster, bootstrap: str) -> None:
    """Gives the group time to commit up to the end (not an error if it does not)."""
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    with AdminClient(cluster.quorum.bootstrap, request_timeout_ms=5000) as admin:
        try:
            latest = admin.list_offsets(dict.fromkeys(tps, "latest"))
        except KafkaError as error:
            print(f"chaos: no end offsets for the group's catch-up: {error}", flush=True)
            return
        ends = {tp: result.offset for tp, result in latest.items()}

        def caught_up() -> bool:
            committed = admin.list_consumer_group_offsets(GROUP, tps)
            return all(tp in committed and committed[tp].offset >= ends[tp] for tp in tps)

        try:
            wait_for(caught_up, timeout_s=20, what="the group to commit up to the end")
        except (AssertionError, KafkaError) as error:
            print(f"chaos: {error}", flush=True)


def _print_summary(summary: dict[str, Any]) -> None:
    check = summary["check"]
    stats = check["stats"]
    print(
        f"chaos: seed {summary['seed']}: {'VALID' if summary['valid'] else 'INVALID'}; "
        f"{stats['ops']} ops, faults {summary['fault_counts']}, "
        f"{stats['acknowledged_checked']} acknowledged sends checked "
        f"({stats['acknowledged_all_checked']} with acks=all)",
        flush=True,
    )
    for severity in ("failures", "infos"):
        for name, found in check[severity].items():
            print(f"chaos:   {severity[:-1]} {name}: {found['count']}", flush=True)
    for problem in summary["problems"]:
        print(f"chaos:   problem: {problem}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--seeds", type=int, default=1, help="runs, seeds seed, seed+1, ...")
    parser.add_argument("--seed", type=int, default=None, help="first seed (or PYKRAFT_SEED)")
    parser.add_argument("--kinds", default=",".join(FAULT_KINDS))
    args = parser.parse_args(argv)
    seed = args.seed
    if seed is None:
        env = os.environ.get("PYKRAFT_SEED")
        seed = int(env) if env else random.SystemRandom().randrange(1, 1 << 31)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = set(kinds) - set(FAULT_KINDS)
    if unknown:
        parser.error(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(FAULT_KINDS)}")
    invalid = []
    for offset in range(args.seeds):
        summary = run(RunConfig(seed + offset, args.seconds, kinds))
        if not summary["valid"]:
            invalid.append(seed + offset)
    if invalid:
        print(f"chaos: INVALID seeds {invalid}; replay with PYKRAFT_SEED=<seed>", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
