"""Issue 18 §3.2 on real controllers: a broker in the ISR of 30,000 partitions is fenced in
bounded steps, so the controller thread keeps polling Raft and the quorum keeps its leader.
Decided in one go, the fence held that thread for seconds: the followers deposed the leader,
the fence's entry was discarded, and the next leader tried the same fence (at 100,000
partitions nobody fenced the broker for over a minute)."""

from __future__ import annotations

from pathlib import Path

from pykraft.client import AdminClient, NewTopic
from pykraft.metadata_log.image import MetadataImage
from pykraft.proto import admin_pb2

from .controllers import Quorum, StandInBroker, running_quorum
from .processes import wait_for

TOPICS = 300
PARTITIONS_PER_TOPIC = 100  # 30,000 partitions, RF 3 over 3 brokers: broker 1 in every ISR
TOPICS_PER_REQUEST = 90  # 27,000 records, within the controller's limit per operation
SESSION_TIMEOUT_MS = 3000


def _term(quorum: Quorum) -> int:
    admin = quorum.admin(quorum.wait_active().address)
    return int(admin.DescribeQuorum(admin_pb2.DescribeQuorumRequest(), timeout=10).leader_epoch)


def _fenced(quorum: Quorum) -> MetadataImage | None:
    image = quorum.image(timeout_s=30)
    registration = image.cluster.broker(1)
    return image if registration is not None and registration.fenced else None


def test_a_broker_in_30000_isrs_is_fenced_while_the_quorum_keeps_its_leader(
    tmp_path: Path,
) -> None:
    extra = ("--broker-session-timeout-ms", str(SESSION_TIMEOUT_MS))
    with running_quorum(tmp_path, extra_args=extra) as quorum:
        brokers = [StandInBroker(quorum, broker_id) for broker_id in (1, 2, 3)]
        for broker in brokers:
            broker.start()
        names = [f"t{i:03}" for i in range(TOPICS)]
        with AdminClient(quorum.bootstrap) as admin:
            for start in range(0, TOPICS, TOPICS_PER_REQUEST):
                chunk = names[start : start + TOPICS_PER_REQUEST]
                admin.create_topics([NewTopic(n, PARTITIONS_PER_TOPIC, 3, {}) for n in chunk])
        term = _term(quorum)

        brokers[0].pause()
        image = wait_for(lambda: _fenced(quorum), timeout_s=60, what="broker 1 fenced")

        assert _term(quorum) == term, "the fence cost the active controller its leadership"
        partitions = [p for t in image.topics.by_id.values() for p in t.partitions.values()]
        assert len(partitions) == TOPICS * PARTITIONS_PER_TOPIC
        assert all(1 not in p.isr and p.leader in (2, 3) for p in partitions)
        for broker in brokers[1:]:
            broker.pause()
