"""Moving partitions between real brokers (issue 16 §3): adding a broker, reassigning under an
acks=all produce load with `pykraft reassign` (KIP-455), and decommissioning a broker.

Three controllers and brokers 1-3 hold `moving` (3 partitions, RF 3, min.insync.replicas=2).
Broker 4 joins; `pykraft reassign --generate` spreads the topic over brokers 2, 3 and 4 and
`--execute` starts it while a producer sends with acks=all; `--verify` exits 0 once complete.
Every acknowledged record is then read back exactly once, broker 1 hosts nothing and has deleted
its partition directories, and once stopped it is unregistered (`pykraft cluster unregister`),
which the controller refused while it still hosted replicas.

With `--execute --throttle`, broker 4 copies a pre-filled topic (and the load) at the throttle's
rate: measured from its log files' growth between 20% and 80% of the final size, within 20% of
the setting; `--verify` then removes the throttle configs.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from pykraft.client import Consumer, FutureRecordMetadata, Producer, TopicPartition
from pykraft.metadata_log.records import ConfigResourceType

from . import cluster
from .controllers import Quorum, run_cli
from .processes import BrokerProcess, wait_for

pytestmark = pytest.mark.integration

TOPIC = "moving"
PARTITIONS = 3
# The producer's bound on records in flight, so the load keeps going while the partitions move.
IN_FLIGHT_MAX = 200
RECORDS_PER_POLL_MAX = 500
# The load's pace: at most one record per this many seconds (about 20 KB/s of small records),
# well under the throttle, so a throttled newcomer still catches up.
LOAD_INTERVAL_S = 0.005
THROTTLE_BYTES_PER_S = 400_000
PREFILL_RECORDS = 2400
PREFILL_VALUE_BYTES = 1000


class _Load:
    """A producer sending with acks=all until stopped; `acknowledged` are the values answered."""

    def __init__(self, bootstrap: str) -> None:
        self._producer = Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        self._stop = threading.Event()
        self._futures: list[tuple[bytes, FutureRecordMetadata]] = []
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sequence = 0
        while not self._stop.wait(LOAD_INTERVAL_S):
            pending = [f for _, f in self._futures[-IN_FLIGHT_MAX:] if not f.done()]
            if len(pending) >= IN_FLIGHT_MAX:
                pending[0].exception(timeout=30)
                continue
            value = b"r%07d" % sequence
            self._futures.append((value, self._producer.send(TOPIC, value)))
            sequence += 1

    @property
    def sent(self) -> int:
        return len(self._futures)

    def stop(self) -> list[bytes]:
        """Stops sending and returns the acknowledged values."""
        self._stop.set()
        self._thread.join(timeout=30)
        self._producer.flush(timeout=60)
        self._producer.close()
        return [value for value, f in self._futures if f.exception(timeout=0) is None]


def _consume_all(bootstrap: str) -> Counter[bytes]:
    partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    received: Counter[bytes] = Counter()
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign(partitions)
        total = sum(consumer.end_offsets(partitions).values())

        def all_received() -> bool:
            records = consumer.poll(500, records_max=RECORDS_PER_POLL_MAX)
            received.update(r.value for r in records if r.value is not None)
            return received.total() >= total

        wait_for(all_received, timeout_s=60, what=f"everything in {TOPIC} consumed")
    return received


def _cli(quorum: Quorum, *args: str) -> str:
    done = run_cli(quorum, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _generate(quorum: Quorum, tmp_path: Path, broker_list: str) -> Path:
    """`pykraft reassign --generate` for TOPIC; the proposed plan, written to a file."""
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
    out = _cli(
        quorum, "reassign", "--generate", "--topics-to-move-json-file", str(topics_file),
        "--broker-list", broker_list,
    )  # fmt: skip
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(out.splitlines()[-1])
    return plan_file


def _verified(quorum: Quorum, plan_file: Path) -> bool:
    args = ("reassign", "--verify", "--reassignment-json-file", str(plan_file))
    return run_cli(quorum, *args).returncode == 0


def test_a_new_broker_takes_partitions_under_load_and_the_old_one_is_decommissioned(
    tmp_path: Path,
) -> None:
    with cluster.running_cluster(tmp_path, topic=TOPIC, partitions=PARTITIONS) as (
        quorum,
        brokers,
    ):
        brokers[4] = cluster.make_broker(tmp_path, quorum, 4)
        cluster.start_brokers(quorum, {4: brokers[4]})
        bootstrap = ",".join(b.address for b in brokers.values())
        plan_file = _generate(quorum, tmp_path, "2,3,4")
        plan = json.loads(plan_file.read_text())["partitions"]
        assert all(sorted(p["replicas"]) == [2, 3, 4] for p in plan)

        load = _Load(bootstrap)
        wait_for(lambda: load.sent > 100, timeout_s=30, what="the load running")
        _cli(quorum, "reassign", "--execute", "--reassignment-json-file", str(plan_file))
        wait_for(lambda: _verified(quorum, plan_file), timeout_s=60, what="reassignment done")
        acknowledged = load.stop()

        for partition_id, registration in cluster.registrations(quorum, TOPIC).items():
            target = next(p["replicas"] for p in plan if p["partition"] == partition_id)
            assert list(registration.replicas) == target
            assert sorted(registration.isr) == [2, 3, 4]
        received = _consume_all(bootstrap)
        assert len(acknowledged) > 100
        missing = [v for v in acknowledged if received[v] == 0]
        assert not missing, f"{len(missing)} acknowledged records lost, first {missing[:3]}"
        assert max(received.values()) == 1, "a record was read twice"
        _decommission(quorum, brokers, 1)


def _decommission(quorum: Quorum, brokers: dict[int, BrokerProcess], broker_id: int) -> None:
    """Broker `broker_id`, hosting nothing now, drops its logs, stops and is unregistered."""
    wait_for(
        lambda: not any(brokers[broker_id].data_dir.glob(f"{TOPIC}-*")),
        timeout_s=30,
        what=f"broker {broker_id} deleting its {TOPIC} logs",
    )
    assert run_cli(quorum, "cluster", "unregister", "--id", str(broker_id)).returncode != 0
    brokers.pop(broker_id).close()
    wait_for(
        lambda: broker_id not in quorum.image().cluster.unfenced_broker_ids(),
        timeout_s=30,
        what=f"broker {broker_id} fenced",
    )
    _cli(quorum, "cluster", "unregister", "--id", str(broker_id))
    wait_for(
        lambda: quorum.image().cluster.broker(broker_id) is None,
        timeout_s=30,
        what=f"broker {broker_id} unregistered",
    )


def _log_bytes(broker: BrokerProcess) -> int:
    return sum(f.stat().st_size for f in broker.data_dir.glob(f"{TOPIC}-*/*.log"))


def _copy_rate_bytes_per_s(samples: list[tuple[float, int]]) -> float:
    """The rate between the first samples at 20% and at 80% of the last one's size."""
    total = samples[-1][1]
    t20 = next(t for t, size in samples if size >= 0.2 * total)
    t80, size80 = next((t, size) for t, size in samples if size >= 0.8 * total)
    size20 = next(size for t, size in samples if t == t20)
    return (size80 - size20) / (t80 - t20)


def test_a_throttled_reassignment_under_load_copies_at_the_throttle_rate(tmp_path: Path) -> None:
    with cluster.running_cluster(tmp_path, topic=TOPIC, partitions=PARTITIONS) as (
        quorum,
        brokers,
    ):
        bootstrap = ",".join(b.address for b in brokers.values())
        with Producer(bootstrap_servers=bootstrap, acks="all") as producer:
            prefill = [b"%05d" % i + bytes(PREFILL_VALUE_BYTES - 5) for i in range(PREFILL_RECORDS)]
            for value in prefill:
                producer.send(TOPIC, value)
            producer.flush(timeout=60)
        brokers[4] = cluster.make_broker(tmp_path, quorum, 4)
        cluster.start_brokers(quorum, {4: brokers[4]})
        plan_file = tmp_path / "plan.json"
        plan = [{"topic": TOPIC, "partition": p, "replicas": [2, 3, 4]} for p in range(PARTITIONS)]
        plan_file.write_text(json.dumps({"version": 1, "partitions": plan}))

        load = _Load(bootstrap)
        wait_for(lambda: load.sent > 50, timeout_s=30, what="the load running")
        _cli(
            quorum, "reassign", "--execute", "--reassignment-json-file", str(plan_file),
            "--throttle", str(THROTTLE_BYTES_PER_S),
        )  # fmt: skip
        samples: list[tuple[float, int]] = []

        def copied() -> bool:
            samples.append((time.monotonic(), _log_bytes(brokers[4])))
            moving = cluster.registrations(quorum, TOPIC).values()
            return all(4 in r.isr and not r.reassigning for r in moving)

        wait_for(copied, timeout_s=60, what="broker 4 caught up and the reassignment complete")
        acknowledged = load.stop()
        rate = _copy_rate_bytes_per_s(samples)
        print(f"copy rate {rate:.0f} B/s under a throttle of {THROTTLE_BYTES_PER_S} B/s")
        assert abs(rate - THROTTLE_BYTES_PER_S) <= 0.2 * THROTTLE_BYTES_PER_S, rate
        assert samples[-1][1] >= PREFILL_RECORDS * PREFILL_VALUE_BYTES

        verified = _cli(quorum, "reassign", "--verify", "--reassignment-json-file", str(plan_file))
        assert "Throttle was removed." in verified
        image = quorum.image()
        topic_configs = image.configs.get(ConfigResourceType.TOPIC, TOPIC)
        assert "follower.replication.throttled.replicas" not in topic_configs
        assert "leader.replication.throttled.replicas" not in topic_configs
        assert not image.configs.get(ConfigResourceType.BROKER, "4")
        received = _consume_all(bootstrap)
        missing = [v for v in (*prefill, *acknowledged) if received[v] == 0]
        assert not missing, f"{len(missing)} acknowledged records lost"
        assert max(received.values()) == 1, "a record was read twice"
