from __future__ import annotations

from uuid import UUID

from pykraft.metadata_log.image import MetadataImage, PartitionRegistration
from pykraft.metadata_log.records import (
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    Record,
)
from pykraft.quorum.controller import (
    HeartbeatTracker,
    fence_expired_brokers,
    records_to_unfence_broker,
    start_fences,
)
from pykraft.quorum.controller.leadership import (
    controlled_shutdown_mark,
    records_to_remove_from_isrs,
)
from tests.unit.quorum.controller.conftest import (
    broker,
    broker_epoch,
    brokers,
    cluster_config,
    image_with,
    topic,
)

T = UUID(int=1)
U = UUID(int=2)


def tracker(image: MetadataImage) -> HeartbeatTracker:
    sessions = HeartbeatTracker(session_timeout_ms=1000)
    sessions.reset(image, now_ms=0)
    return sessions


def records_to_fence_broker(image: MetadataImage, broker_id: int) -> list[Record]:
    """The whole fence of `broker_id`, in one step."""
    records, fenced = start_fences(image, [broker_id], tracker(image), image.offset + 1)
    assert fenced
    return records


def partitions(image: MetadataImage, topic_id: UUID = T) -> dict[int, PartitionRegistration]:
    return dict(image.topics.by_id[topic_id].partitions)


BASE = image_with(
    *brokers(1, 2, 3),
    *topic(
        "t",
        T,
        [
            (1, 2, 3),  # led by 1
            (2, 1, 3),  # 1 follows
            (3, 2),  # 1 not a replica
            PartitionRegistration((1, 3, 2), (2, 1, 3), 2, 0, 0),  # 1 follows, not preferred
        ],
    ),
)


def test_fencing_moves_leadership_in_replica_order_and_takes_the_broker_out_of_every_isr() -> None:
    records = records_to_fence_broker(BASE, 1)
    assert records == [
        PartitionChangeRecord(T, 0, isr=(2, 3), leader=2),
        PartitionChangeRecord(T, 1, isr=(2, 3)),
        PartitionChangeRecord(T, 3, isr=(2, 3)),
        BrokerRegistrationChangeRecord(1, broker_epoch(1), fenced=True),
    ]
    fenced = image_with(*records, base=BASE)
    after = partitions(fenced)
    assert after[0] == PartitionRegistration((1, 2, 3), (2, 3), 2, 1, 1)
    assert after[1].leader == 2 and after[1].leader_epoch == 0  # same leader, same epoch
    assert after[2] == partitions(BASE)[2]
    assert all(1 not in p.isr for p in after.values())
    registration = fenced.cluster.broker(1)
    assert registration is not None and registration.fenced


def test_new_leader_must_be_unfenced() -> None:
    image = image_with(broker(2, fenced=True), base=BASE)
    records = records_to_fence_broker(image, 1)
    assert records[0] == PartitionChangeRecord(T, 0, isr=(2, 3), leader=3)


def test_last_isr_member_stays_in_the_isr_and_the_partition_goes_leaderless() -> None:
    image = image_with(*topic("u", U, [(1, 2)]), base=BASE)
    image = image_with(PartitionChangeRecord(U, 0, isr=(1,)), base=image)
    fenced = image_with(*records_to_fence_broker(image, 1), base=image)
    alone = partitions(fenced, U)[0]
    assert (alone.isr, alone.leader) == ((1,), NO_LEADER)


def test_unclean_election_only_when_enabled_for_the_topic_or_the_cluster() -> None:
    lone = PartitionRegistration((1, 2), (1,), 1, 0, 0)
    for extra in (
        topic("u", U, [lone], {"unclean.leader.election.enable": "true"}),
        [*topic("u", U, [lone]), cluster_config("unclean.leader.election.enable", "true")],
    ):
        image = image_with(*extra, base=BASE)
        fenced = image_with(*records_to_fence_broker(image, 1), base=image)
        assert (partitions(fenced, U)[0].leader, partitions(fenced, U)[0].isr) == (2, (2,))
    overridden = image_with(
        *topic("u", U, [lone], {"unclean.leader.election.enable": "false"}),
        cluster_config("unclean.leader.election.enable", "true"),
        base=BASE,
    )
    fenced = image_with(*records_to_fence_broker(overridden, 1), base=overridden)
    assert partitions(fenced, U)[0].leader == NO_LEADER


def test_unfencing_gives_leaderless_partitions_back_a_leader_from_their_isr() -> None:
    image = image_with(*topic("u", U, [(1, 2), (2, 3)]), base=BASE)
    image = image_with(PartitionChangeRecord(U, 0, isr=(1,)), base=image)
    fenced = image_with(*records_to_fence_broker(image, 1), base=image)
    assert partitions(fenced, U)[0].leader == NO_LEADER

    records = records_to_unfence_broker(fenced, 1)
    assert records == [
        BrokerRegistrationChangeRecord(1, broker_epoch(1), fenced=False),
        PartitionChangeRecord(U, 0, leader=1),
    ]
    back = image_with(*records, base=fenced)
    assert partitions(back, U)[0].leader == 1
    assert partitions(back, U)[0].leader_epoch == partitions(image, U)[0].leader_epoch + 2


def test_controlled_shutdown_marks_the_broker_and_moves_leaderships_away() -> None:
    records = controlled_shutdown_mark(BASE, 1) + records_to_remove_from_isrs(BASE, [1], 100)
    assert records[0] == BrokerRegistrationChangeRecord(
        1, broker_epoch(1), in_controlled_shutdown=True
    )
    shutting = image_with(*records, base=BASE)
    registration = shutting.cluster.broker(1)
    assert registration is not None and registration.in_controlled_shutdown
    assert not registration.fenced
    assert all(p.leader != 1 and 1 not in p.isr for p in partitions(shutting).values())


def test_fencing_several_brokers_at_once_never_elects_one_of_them() -> None:
    result = fence_expired_brokers(BASE, [2, 1, 2], tracker(BASE), BASE.offset + 1)
    fenced = image_with(*result.records, base=BASE)
    assert {p.leader for p in partitions(fenced).values()} == {3}
    assert fenced.cluster.unfenced_broker_ids() == [3]
    again = fence_expired_brokers(fenced, [1, 2, 42], tracker(fenced), fenced.offset + 1)
    assert again.records == ()
