"""Replication between real broker processes (issue 4 §3 and §5.2, §5.5).

Three controllers and three brokers; a topic with 3 partitions, replication factor 3 and
min.insync.replicas=2. Records produced with acks=-1 reach every replica byte for byte; kill -9
of a partition's leader while producing loses no acknowledged record; the killed broker restarts,
catches up and is back in every ISR; with two brokers down acks=-1 gets NOT_ENOUGH_REPLICAS.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from pykraft.broker.log import LogConfig, PartitionLog
from pykraft.broker.replica_fetcher import REPLICA_FETCH_WAIT_MS_MAX
from pykraft.metadata_log import PartitionRegistration
from pykraft.proto import broker_pb2, common_pb2

from . import cluster
from .cluster import BROKER_IDS, batch_records, fetch_raw, produce_raw
from .controllers import Quorum, run_cli
from .processes import BrokerProcess, wait_for

pytestmark = pytest.mark.integration

TOPIC = "replicated"
PARTITIONS = 3
LAG_TIME_MAX_MS = 2000
# A replica id no broker has: fetches as a replica (up to the log end) without being counted.
OBSERVER_ID = 99
PRODUCE_RETRIES_MAX = 200
# Longer than a follower's fetch waits at the leader, shorter than the lag and session timeouts.
PARKED_FETCH_DRAIN_S = REPLICA_FETCH_WAIT_MS_MAX / 1000 + 0.3


def _registrations(quorum: Quorum) -> dict[int, PartitionRegistration]:
    return cluster.registrations(quorum, TOPIC)


def _full_isr(quorum: Quorum) -> bool:
    return cluster.full_isr(quorum, TOPIC, PARTITIONS)


def _produce(
    broker: BrokerProcess, partition: int, values: list[bytes], *, acks: int = -1
) -> broker_pb2.ProducePartitionResult:
    return produce_raw(broker, TOPIC, partition, values, acks=acks)


def _fetch(
    broker: BrokerProcess, partition: int, offset: int, *, replica_id: int = -1
) -> broker_pb2.FetchPartitionResult:
    return fetch_raw(broker, TOPIC, partition, offset, replica_id=replica_id)


_records = batch_records


def _consume_all(broker: BrokerProcess, partition: int) -> list[bytes]:
    """Every committed value of the partition, from the broker leading it."""
    values: list[bytes] = []
    offset = 0
    while True:
        result = _fetch(broker, partition, offset)
        assert result.error_code == common_pb2.NONE, result.error_message
        records = [r for r in _records(result.records) if r.offset >= offset]
        if not records:
            return values
        values += [r.value or b"" for r in records]
        offset = records[-1].offset + 1


def _settled(broker: BrokerProcess, partition: int) -> bool:
    """Whether the leader holds nothing above its high-water mark (every ISR member has all)."""
    high_watermark = _fetch(broker, partition, 0).high_watermark
    beyond = _fetch(broker, partition, high_watermark, replica_id=OBSERVER_ID)
    return beyond.error_code == common_pb2.NONE and not beyond.records


def _log_bytes(directory: Path) -> bytes:
    log = PartitionLog.open(directory, LogConfig.from_topic_configs({}), now_ms=0)
    try:
        data, offset = b"", log.log_start_offset
        while offset < log.log_end_offset:
            read = log.read(offset, bytes_max=1 << 22)
            data += read.data
            offset = read.next_offset
        return data
    finally:
        log.close()


@contextmanager
def _cluster(tmp_path: Path) -> Iterator[tuple[Quorum, dict[int, BrokerProcess]]]:
    lag = ("--replica-lag-time-max-ms", str(LAG_TIME_MAX_MS))
    with cluster.running_cluster(
        tmp_path, topic=TOPIC, partitions=PARTITIONS, broker_args=lag
    ) as running:
        yield running


class _Producer:
    """Produces numbered values with acks=-1 to one partition, following its leader as the
    controller's image names it, and keeps the values acknowledged."""

    def __init__(self, quorum: Quorum, brokers: dict[int, BrokerProcess], partition: int) -> None:
        self._quorum = quorum
        self._brokers = brokers
        self._partition = partition
        self.acknowledged: list[bytes] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Producer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=20)

    def _run(self) -> None:
        sequence = 0
        while not self._stop.is_set() and self.errors < PRODUCE_RETRIES_MAX:
            values = [f"p{self._partition}-{sequence + i}".encode() for i in range(10)]
            try:
                leader = _registrations(self._quorum)[self._partition].leader
                result = _produce(self._brokers[leader], self._partition, values)
            except (grpc.RpcError, KeyError, AssertionError):
                result = None
            if result is not None and result.error_code == common_pb2.NONE:
                self.acknowledged += values
                sequence += len(values)
            else:
                self.errors += 1
                self._stop.wait(0.1)


def test_replicas_converge_and_survive_a_leader_kill(tmp_path: Path) -> None:
    with _cluster(tmp_path) as (quorum, brokers):
        registrations = _registrations(quorum)
        produced: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        for round_ in range(10):
            for p, registration in registrations.items():
                values = [f"r{round_}-{p}-{i}".encode() for i in range(100 // PARTITIONS + 1)]
                result = _produce(brokers[registration.leader], p, values)
                assert result.error_code == common_pb2.NONE, result.error_message
                produced[p] += values
        assert sum(len(v) for v in produced.values()) >= 1000

        # kill -9 the leader of partition 0 while a producer with acks=-1 writes to it.
        victim = registrations[0].leader
        with _Producer(quorum, brokers, 0) as producer:
            wait_for(lambda: len(producer.acknowledged) >= 100, timeout_s=10, what="acks")
            brokers[victim].kill()
            before = len(producer.acknowledged)
            wait_for(
                lambda: len(producer.acknowledged) >= before + 100,
                timeout_s=30,
                what="acks from the new leader",
            )
        new_leader = _registrations(quorum)[0].leader
        assert new_leader != victim
        committed = _consume_all(brokers[new_leader], 0)
        assert set(produced[0]) <= set(committed)
        missing = [v for v in producer.acknowledged if v not in set(committed)]
        assert not missing, f"{len(missing)} acknowledged records lost"

        # The killed broker restarts, catches up and is back in every ISR.
        brokers[victim].start()
        wait_for(lambda: _full_isr(quorum), timeout_s=30, what="the restarted broker in the ISR")
        described = run_cli(quorum, "topics", "describe", "--topic", TOPIC, "--output", "json")
        assert described.returncode == 0, described.stderr
        parsed = json.loads(described.stdout)
        topics = parsed["topics"] if isinstance(parsed, dict) else parsed
        assert all(sorted(p["isr"]) == list(BROKER_IDS) for p in topics[0]["partitions"])

        # Every replica holds the same bytes.
        leaders = {p: r.leader for p, r in _registrations(quorum).items()}
        wait_for(
            lambda: all(_settled(brokers[leader], p) for p, leader in leaders.items()),
            timeout_s=10,
            what="followers caught up",
        )
        for broker in brokers.values():
            broker.stop()
        for p in range(PARTITIONS):
            logs = {i: _log_bytes(b.data_dir / f"{TOPIC}-{p}") for i, b in brokers.items()}
            assert len(set(logs.values())) == 1, {i: len(data) for i, data in logs.items()}
            values = [r.value or b"" for r in _records(logs[1])]
            assert set(produced[p]) <= set(values)


def test_acks_all_needs_min_insync_replicas(tmp_path: Path) -> None:
    with _cluster(tmp_path) as (quorum, brokers):
        leader = _registrations(quorum)[0].leader
        ok = _produce(brokers[leader], 0, [b"replicated"])
        assert ok.error_code == common_pb2.NONE, ok.error_message
        for broker_id, broker in brokers.items():
            if broker_id != leader:
                broker.kill()

        def refused() -> bool:
            result = _produce(brokers[leader], 0, [b"refused"])
            return result.error_code == common_pb2.NOT_ENOUGH_REPLICAS

        wait_for(refused, timeout_s=20, what="NOT_ENOUGH_REPLICAS with one broker left")
        assert _registrations(quorum)[0].isr == (leader,)
        # acks=1 is still taken, but stays invisible: the high-water mark does not advance.
        high_watermark = _fetch(brokers[leader], 0, 0).high_watermark
        assert _produce(brokers[leader], 0, [b"acks-1"], acks=1).error_code == common_pb2.NONE
        assert _fetch(brokers[leader], 0, 0).high_watermark == high_watermark


def _leads(broker: BrokerProcess, partition: int, leader_epoch: int) -> bool:
    """Whether `broker`'s own metadata has it leading `partition` in `leader_epoch`."""
    request = broker_pb2.MetadataRequest(topics=[TOPIC])
    response: broker_pb2.MetadataResponse = broker.stub().Metadata(request, timeout=5)
    found = [p for t in response.topics for p in t.partitions if p.partition == partition]
    return bool(found) and (found[0].leader_id, found[0].leader_epoch) == (
        broker.node_id,
        leader_epoch,
    )


def test_deposed_leader_truncates_what_was_never_committed(tmp_path: Path) -> None:
    """Issue 4 §5.3: records only the leader had (followers stopped, acks=1) are cut from it when
    it rejoins under a new leader; every replica ends byte-identical, and no consumer saw them."""
    with _cluster(tmp_path) as (quorum, brokers):
        before = _registrations(quorum)[0]
        old_leader = brokers[before.leader]
        committed = [f"committed-{i}".encode() for i in range(20)]
        assert _produce(old_leader, 0, committed).error_code == common_pb2.NONE
        wait_for(lambda: _settled(old_leader, 0), timeout_s=10, what="followers caught up")

        followers = [brokers[i] for i in BROKER_IDS if i != before.leader]
        for follower in followers:
            follower.pause()
        try:
            # A fetch the followers sent before stopping is parked at the leader and would carry
            # the next records to their sockets: let it run out (nothing observable marks it).
            time.sleep(PARKED_FETCH_DRAIN_S)
            lost = [f"acks-1-{i}".encode() for i in range(5)]
            result = _produce(old_leader, 0, lost, acks=1)
            assert result.error_code == common_pb2.NONE, result.error_message
            # Not committed, so never given out: the high-water mark stays below them.
            assert _fetch(old_leader, 0, 0).high_watermark == len(committed)
            old_leader.kill()
        finally:
            for follower in followers:
                follower.resume()

        def new_leader() -> PartitionRegistration | None:
            registration = _registrations(quorum)[0]
            return registration if registration.leader not in (before.leader, -1) else None

        after = wait_for(new_leader, timeout_s=20, what="a new leader")
        assert after.leader_epoch > before.leader_epoch
        # The controller decided; the new leader learns it from its next metadata fetch.
        wait_for(
            lambda: _leads(brokers[after.leader], 0, after.leader_epoch),
            timeout_s=10,
            what="the new leader knowing it leads",
        )
        fresh = [f"new-leader-{i}".encode() for i in range(10)]
        result = _produce(brokers[after.leader], 0, fresh)
        assert result.error_code == common_pb2.NONE, result.error_message

        old_leader.start()
        wait_for(lambda: _full_isr(quorum), timeout_s=30, what="the old leader back in the ISR")
        assert _consume_all(brokers[after.leader], 0) == committed + fresh
        assert "diverged from the leader" in old_leader.log_path.read_text()
        wait_for(
            lambda: _settled(brokers[_registrations(quorum)[0].leader], 0),
            timeout_s=10,
            what="followers caught up",
        )
        for broker in brokers.values():
            broker.stop()
        logs = {i: _log_bytes(b.data_dir / f"{TOPIC}-0") for i, b in brokers.items()}
        assert len(set(logs.values())) == 1, {i: len(data) for i, data in logs.items()}
        assert [r.value for r in _records(logs[before.leader])] == committed + fresh
