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
gets no record. The functions here look only at the partitions the image's per-broker indexes
name (`metadata_log/partition_index.py`, Kafka's BrokersToIsrs), never at every partition, and
write their records in topic name then partition order, so the records are deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Final
from uuid import UUID

from pykraft.metadata_log.image import MetadataImage, PartitionRegistration, TopicImage
from pykraft.metadata_log.partition_index import PartitionKey
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


def _in_order(
    image: MetadataImage, keys: Iterable[PartitionKey]
) -> list[tuple[TopicImage, int, PartitionRegistration]]:
    """The partitions `keys` by topic name then partition id, so records are deterministic."""
    found = []
    for topic_id, partition_id in keys:
        topic = image.topics.by_id[topic_id]
        found.append((topic, partition_id, topic.partitions[partition_id]))
    found.sort(key=lambda item: (item[0].name, item[1]))
    return found


def _changes(
    image: MetadataImage,
    keys: Iterable[PartitionKey],
    *,
    leaving: Collection[int],
    can_lead: Callable[[int], bool],
) -> list[PartitionChangeRecord]:
    changes = []
    unclean_by_topic: dict[str, bool] = {}  # a config lookup per topic, not per partition
    for topic, partition_id, partition in _in_order(image, keys):
        unclean = unclean_by_topic.get(topic.name)
        if unclean is None:
            unclean = unclean_by_topic[topic.name] = topic_flag(
                image, topic.name, UNCLEAN_LEADER_ELECTION
            )
        change = partition_change(
            topic, partition_id, partition, leaving=leaving, can_lead=can_lead, unclean=unclean
        )
        if change is not None:
            changes.append(change)
    return changes


def partitions_to_leave(
    image: MetadataImage, broker_ids: Collection[int], partitions_max: int
) -> list[PartitionKey]:
    """Up to `partitions_max` partitions with a leader whose ISR holds one of `broker_ids`
    (the image's index: no scan of other partitions). Each one changes when they leave (its ISR
    shrinks or it loses its leader), so it is not among the next call's once that replays."""
    assert partitions_max > 0
    chosen: dict[PartitionKey, None] = {}
    for broker_id in broker_ids:
        for key in image.topics.partitions_in_isr(broker_id):
            if len(chosen) >= partitions_max:
                return list(chosen)
            chosen[key] = None
    return list(chosen)


def records_to_remove_from_isrs(
    image: MetadataImage, broker_ids: Collection[int], partitions_max: int
) -> list[PartitionChangeRecord]:
    """Partition changes taking `broker_ids` out of the ISR and leadership of up to
    `partitions_max` partitions, by the rules above (leaderless partitions stay as they are: no
    leader waits for their ISR). The brokers are treated as unable to lead whatever their
    registration says, so a caller may put these records before or after the registration
    change that fences them, and split the work over several calls."""
    return records_to_leave(
        image, partitions_to_leave(image, broker_ids, partitions_max), broker_ids
    )


def records_to_leave(
    image: MetadataImage, keys: Iterable[PartitionKey], broker_ids: Collection[int]
) -> list[PartitionChangeRecord]:
    """`records_to_remove_from_isrs` for the partitions `keys` (from `partitions_to_leave`)."""
    can_lead = _leaders_can_be(image, broker_ids)
    return _changes(image, keys, leaving=broker_ids, can_lead=can_lead)


def records_for_offline_replicas(
    image: MetadataImage, broker_id: int, offline: Mapping[UUID, Collection[int]]
) -> list[Record]:
    """Takes `broker_id` out of the ISR and leadership of the replicas it cannot serve (their
    log directory failed), by the rules above; its other partitions stay as they are."""
    in_isr = image.topics.partitions_in_isr(broker_id)
    keys = [
        (topic_id, partition_id)
        for topic_id, partition_ids in offline.items()
        for partition_id in partition_ids
        if (topic_id, partition_id) in in_isr
    ]
    return list(records_to_leave(image, keys, (broker_id,)))


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
    leaderless = image.topics.leaderless_partitions(broker_id)
    records.extend(_changes(image, leaderless, leaving=(), can_lead=usable.__contains__))
    return records


def controlled_shutdown_mark(image: MetadataImage, broker_id: int) -> list[Record]:
    """The record marking a broker in controlled shutdown, unless it is already marked; its
    partitions are then moved away step by step (`leaving.py`), and, as in Kafka, it leaves
    their ISRs too, so acks=all writes stop waiting for it."""
    registration = image.cluster.broker(broker_id)
    assert registration is not None, f"broker {broker_id} is not registered"
    if registration.in_controlled_shutdown:
        return []
    return [
        BrokerRegistrationChangeRecord(
            broker_id, registration.broker_epoch, in_controlled_shutdown=True
        )
    ]


def leads_any_partition(image: MetadataImage, broker_id: int) -> bool:
    leader_counts = image.topics.leader_counts
    assert leader_counts is not None
    return leader_counts.get(broker_id, 0) > 0
