"""Moving partitions between real brokers (issue 16 §3): adding a broker, reassigning under an
acks=all produce load with `pykraft reassign` (KIP-455), and decommissioning a broker.

Three controllers and brokers 1-3 hold `moving` (3 partitions, RF 3, min.insync.replicas=2).
Broker 4 joins; `pykraft reassign --generate` spreads the topic over brokers 2, 3 and 4 and
`--execute` starts it while a producer sends with acks=all; `--verify` exits 0 once complete.
Every acknowledged record is then read back exactly once, broker 1 hosts nothing and has deleted
its partition directories, and once stopped it is unregistered (`pykraft cluster unregister`),
which the controller refused while it still hosted replicas.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from concurrent.futures import Future
from pathlib import Path

import pytest

from pykraft.client import Consumer, Producer, RecordMetadata, TopicPartition

from . import cluster
from .controllers import Quorum, run_cli
from .processes import BrokerProcess, wait_for

pytestmark = pytest.mark.integration

TOPIC = "moving"
PARTITIONS = 3
# The producer's bound on records in flight, so the load keeps going while the partitions move.
IN_FLIGHT_MAX = 200
RECORDS_PER_POLL_MAX = 500


class _Load:
    """A producer sending with acks=all until stopped; `acknowledged` are the values answered."""

    def __init__(self, bootstrap: str) -> None:
        self._producer = Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        self._stop = threading.Event()
        self._futures: list[tuple[bytes, Future[RecordMetadata]]] = []
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sequence = 0
        while not self._stop.is_set():
            pending = [f for _, f in self._futures[-IN_FLIGHT_MAX:] if not f.done()]
            if len(pending) >= IN_FLIGHT_MAX:
                pending[0].exception(timeout=30)
                continue
            value = b"r%07d" % sequence
            self._futures.append((value, self._producer.send(TOPIC, value)))
            sequence += 1

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
            received.update(r.value for r in consumer.poll(500, records_max=RECORDS_PER_POLL_MAX))
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
        wait_for(lambda: len(load._futures) > 100, timeout_s=30, what="the load running")
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
