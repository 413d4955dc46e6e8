"""Leader election and ISR upkeep when brokers come and go (Kafka's PartitionChangeBuilder rules).

A broker that is fenced, shutting down or replaced by a new incarnation leaves every ISR it is
in, and partitions it led get a new leader:
- the current leader stays if it is still in the ISR and able to lead;
- else the first replica (in replica order, which is preference order) that is in the ISR and
  able to lead, i.e. registered, unfenced and not in controlled shutdown;
- an ISR never becomes empty: when its last member leaves, the ISR keeps it and the partition
  is left without a leader (-1), so that only that broker, which holds every committed record,
  can lead it again (Kafka's rule before eligible leader replicas);
- only when the topic's `unclean.leader.election.enable` is true (topic override, else the
  cluster-wide broker value) may a live replica outside the ISR lead; its ISR becomes just it.

A PartitionChangeRecord names `leader` only when the leader changes (replay bumps the leader
epoch whenever it is named) and `isr` only when the ISR changes; a partition that does not change
gets no record. Every function here scans all partitions, in topic name then partition order,
so the records are deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Final
from uuid import UUID

from pykraft.metadata_log.image import MetadataImage, PartitionRegistration, TopicImage
from pykraft.metadata_log.records import (
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    Record,
)
from pykraft.quorum.controller.configs import topic_flag

UNCLEAN_LEADER_ELECTION: Final = "unclean.leader.election.enable"


def partitions_in_order(
    image: MetadataImage,
) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
    """Every partition of the image, by topic name then partition id."""
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_id[image.topics.by_name[name]]
        for partition_id in sorted(topic.partitions):
            yield topic, partition_id, topic.partitions[partition_id]


def elect_leader(
    partition: PartitionRegistration,
    isr: tuple[int, ...],
    can_lead: Callable[[int], bool],
    *,
    unclean: bool,
) -> tuple[int, bool]:
    """(leader, whether the election was unclean) for `partition` with ISR `isr`."""
    if partition.leader in isr and can_lead(partition.leader):
        return partition.leader, False
    for replica in partition.replicas:
        if replica in isr and can_lead(replica):
            return replica, False
    if unclean:
        for replica in partition.replicas:
            if can_lead(replica):
                return replica, True
    return NO_LEADER, False


def partition_change(
    topic: TopicImage,
    partition_id: int,
    partition: PartitionRegistration,
    *,
    leaving: Collection[int],
    can_lead: Callable[[int], bool],
    unclean: bool,
) -> PartitionChangeRecord | None:
    """The change that takes `leaving` out of the ISR and re-elects a leader, or None."""
    isr = tuple(replica for replica in partition.isr if replica not in leaving) or partition.isr
    leader, was_unclean = elect_leader(partition, isr, can_lead, unclean=unclean)
    if was_unclean:
        isr = (leader,)
    new_isr = None if isr == partition.isr else isr
    new_leader = None if leader == partition.leader else leader
    if new_isr is None and new_leader is None:
        return None
    return PartitionChangeRecord(topic.topic_id, partition_id, isr=new_isr, leader=new_leader)


def _leaders_can_be(image: MetadataImage, excluded: Collection[int]) -> Callable[[int], bool]:
    usable = set(image.cluster.unfenced_broker_ids()).difference(excluded)
    return usable.__contains__


def records_to_remove_from_isrs(
    image: MetadataImage, broker_ids: Collection[int]
) -> list[PartitionChangeRecord]:
    """Partition changes taking `broker_ids` out of every ISR and leadership, by the rules above.

    The brokers are treated as unable to lead whatever their registration says, so a caller may
    put these records before or after the registration change that fences them.
    """
    can_lead = _leaders_can_be(image, broker_ids)
    changes = []
    for topic, partition_id, partition in partitions_in_order(image):
        if not any(broker_id in partition.isr for broker_id in broker_ids):
            continue
        change = partition_change(
            topic,
            partition_id,
            partition,
            leaving=broker_ids,
            can_lead=can_lead,
            unclean=topic_flag(image, topic.name, UNCLEAN_LEADER_ELECTION),
        )
        if change is not None:
            changes.append(change)
    return changes


def records_for_offline_replicas(
    image: MetadataImage, broker_id: int, offline: Mapping[UUID, Collection[int]]
) -> list[Record]:
    """Takes `broker_id` out of the ISR and leadership of the replicas it cannot serve (their
    log directory failed), by the rules above; its other partitions stay as they are."""
    usable = set(image.cluster.unfenced_broker_ids()) - {broker_id}
    changes: list[Record] = []
    for topic, partition_id, partition in partitions_in_order(image):
        if broker_id not in partition.isr or partition_id not in offline.get(topic.topic_id, ()):
            continue
        change = partition_change(
            topic,
            partition_id,
            partition,
            leaving=(broker_id,),
            can_lead=usable.__contains__,
            unclean=topic_flag(image, topic.name, UNCLEAN_LEADER_ELECTION),
        )
        if change is not None:
            changes.append(change)
    return changes


def records_to_fence_brokers(image: MetadataImage, broker_ids: Collection[int]) -> list[Record]:
    """Fences the registered, unfenced brokers among `broker_ids`: ISR and leader changes first,
    then one BrokerRegistrationChangeRecord(fenced=True) each (Kafka's order). Brokers that are
    unknown or already fenced are skipped."""
    fencing = sorted(
        broker_id
        for broker_id in set(broker_ids)
        if (broker := image.cluster.broker(broker_id)) is not None and not broker.fenced
    )
    records: list[Record] = list(records_to_remove_from_isrs(image, fencing))
    for broker_id in fencing:
        registration = image.cluster.broker(broker_id)
        assert registration is not None
        records.append(
            BrokerRegistrationChangeRecord(broker_id, registration.broker_epoch, fenced=True)
        )
    return records


def records_to_fence_broker(image: MetadataImage, broker_id: int) -> list[Record]:
    """`records_to_fence_brokers` for one broker."""
    return records_to_fence_brokers(image, (broker_id,))


def records_to_unfence_broker(image: MetadataImage, broker_id: int) -> list[Record]:
    """Unfences a registered broker: the registration change first, then a leader for every
    leaderless partition it can now lead (it is in the ISR, or, where unclean election is
    enabled, a replica)."""
    registration = image.cluster.broker(broker_id)
    assert registration is not None, f"broker {broker_id} is not registered"
    records: list[Record] = [
        BrokerRegistrationChangeRecord(broker_id, registration.broker_epoch, fenced=False)
    ]
    usable = set(image.cluster.unfenced_broker_ids())
    if not registration.in_controlled_shutdown:
        usable.add(broker_id)
    for topic, partition_id, partition in partitions_in_order(image):
        if partition.leader != NO_LEADER or broker_id not in partition.replicas:
            continue
        change = partition_change(
            topic,
            partition_id,
            partition,
            leaving=(),
            can_lead=usable.__contains__,
            unclean=topic_flag(image, topic.name, UNCLEAN_LEADER_ELECTION),
        )
        if change is not None:
            records.append(change)
    return records


def records_for_controlled_shutdown(image: MetadataImage, broker_id: int) -> list[Record]:
    """Marks a broker in controlled shutdown (once) and moves its leaderships away; as in Kafka
    it also leaves every ISR, so acks=all writes stop waiting for it."""
    registration = image.cluster.broker(broker_id)
    assert registration is not None, f"broker {broker_id} is not registered"
    records: list[Record] = []
    if not registration.in_controlled_shutdown:
        records.append(
            BrokerRegistrationChangeRecord(
                broker_id, registration.broker_epoch, in_controlled_shutdown=True
            )
        )
    records.extend(records_to_remove_from_isrs(image, (broker_id,)))
    return records


def leads_any_partition(image: MetadataImage, broker_id: int) -> bool:
    return any(
        partition.leader == broker_id
        for topic in image.topics.by_id.values()
        for partition in topic.partitions.values()
    )
