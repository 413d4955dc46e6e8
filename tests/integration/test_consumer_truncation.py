"""A consumer after an unclean leader election on a real cluster (issue 12 §2.6, KIP-320).

Three controllers and three brokers; one partition, replication factor 3, min.insync.replicas=1
and unclean.leader.election.enable=true. Offsets 0..4 reach every replica; then both followers
are killed (they leave the ISR once fenced) and offsets 5..9 reach the leader alone. Two
consumers read all ten. The leader is killed; a follower comes back and, being the only live
replica, is elected uncleanly: its log ends at 5. It takes eight other records (offsets 5..12).

Reading on at offset 10 would hand out new 10..12 as if they followed old 9. Instead, the
consumer with auto_offset_reset="earliest" moves back to 5, where the histories part, and reads
the new records from there; the one with "none" raises LogTruncationError naming its position
(10) and the divergent offset (5, with the old leader epoch).
"""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest

from pykraft.client import (
    Consumer,
    ConsumerRecord,
    LogTruncationError,
    OffsetAndMetadata,
    TopicPartition,
)
from pykraft.proto import broker_pb2, common_pb2

from . import cluster
from .processes import BrokerProcess, wait_for

pytestmark = pytest.mark.integration

TOPIC = "truncated"
TP = TopicPartition(TOPIC, 0)
OLD = [b"old-%d" % i for i in range(10)]
NEW = [b"new-%d" % i for i in range(5, 13)]
READ_TIMEOUT_S = 60


def _produce(
    broker: BrokerProcess, values: list[bytes], acks: int
) -> broker_pb2.ProducePartitionResult:
    """Produces through `broker` once it leads (and listens): retries NOT_LEADER and refusals,
    which append nothing."""

    def attempt() -> broker_pb2.ProducePartitionResult | None:
        try:
            result = cluster.produce_raw(broker, TOPIC, 0, values, acks=acks)
        except grpc.RpcError:
            return None
        return result if result.error_code == common_pb2.NONE else None

    return wait_for(attempt, timeout_s=30, what=f"broker {broker.node_id} takes {values[0]!r}")


def _read(consumer: Consumer, count: int) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(records) < count:
        assert time.monotonic() < deadline, f"read only {len(records)} of {count}"
        records += consumer.poll(200)
    return records


def test_a_consumer_past_an_unclean_elections_cut_resets_or_raises(tmp_path: Path) -> None:
    topic_args = (
        "--config",
        "min.insync.replicas=1",
        "--config",
        "unclean.leader.election.enable=true",
    )
    with cluster.running_cluster(tmp_path, topic=TOPIC, partitions=1, topic_args=topic_args) as (
        quorum,
        brokers,
    ):
        registration = cluster.registrations(quorum, TOPIC)[0]
        leader, old_epoch = brokers[registration.leader], registration.leader_epoch
        followers = [b for b in brokers.values() if b is not leader]
        assert _produce(leader, OLD[:5], acks=-1).base_offset == 0  # on every replica
        for follower in followers:
            follower.kill()
        wait_for(
            lambda: cluster.registrations(quorum, TOPIC)[0].isr == (leader.node_id,),
            timeout_s=30,
            what="the killed followers out of the ISR",
        )
        assert _produce(leader, OLD[5:], acks=-1).base_offset == 5  # on the leader alone

        bootstrap = ",".join(b.address for b in brokers.values())
        resetting = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        strict = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="none")
        try:
            for consumer in (resetting, strict):
                consumer.assign([TP])
                consumer.seek(TP, 0)
                assert [r.value for r in _read(consumer, 10)] == OLD

            leader.kill()
            survivor = followers[0]
            survivor.start()
            wait_for(
                lambda: cluster.registrations(quorum, TOPIC)[0].leader == survivor.node_id,
                timeout_s=30,
                what=f"broker {survivor.node_id} elected uncleanly",
            )
            new_epoch = cluster.registrations(quorum, TOPIC)[0].leader_epoch
            assert new_epoch > old_epoch
            assert _produce(survivor, NEW, acks=1).base_offset == 5  # its log ended at 5

            records = _read(resetting, len(NEW))
            assert [(r.offset, r.value) for r in records] == list(
                zip(range(5, 13), NEW, strict=True)
            )
            with pytest.raises(LogTruncationError) as raised:
                _read(strict, 1)
            assert raised.value.fetch_offsets == {TP: 10}
            assert raised.value.divergent_offsets == {TP: OffsetAndMetadata(5, "", old_epoch)}
        finally:
            resetting.close()
            strict.close()
