"""Preferred leader election: leadership goes back to a partition's first replica (Kafka's
ElectLeaders with ElectionType PREFERRED, and `auto.leader.rebalance.enable`).

The preferred replica of a partition is the first of its replicas. It may take leadership when it
is in the ISR and able to lead (registered, unfenced, not in controlled shutdown); the election is
one PartitionChangeRecord naming it as leader (the ISR does not change, replay bumps the leader
epoch). Per partition the answer is:
- NONE: a record moves leadership to the preferred replica;
- ELECTION_NOT_NEEDED: the preferred replica already leads;
- PREFERRED_LEADER_NOT_AVAILABLE: it is out of the ISR or cannot lead;
- UNKNOWN_TOPIC_OR_PARTITION: no such topic or partition.

The automatic rebalance (`balance_partition_leaders`) elects every partition whose preferred
replica could lead but does not, at most `ELECTIONS_PER_BALANCE_MAX` per run. As in Kafka's
KRaft controller it does not weigh `leader.imbalance.per.broker.percentage`: any imbalanced
partition is moved back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from pykraft.metadata_log.image import MetadataImage, PartitionRegistration, TopicImage
from pykraft.metadata_log.records import PartitionChangeRecord
from pykraft.proto import admin_pb2, common_pb2
from pykraft.quorum.controller.leadership import partitions_in_order
from pykraft.quorum.controller.result import ControllerResult, OperationTooLarge, RecordBuffer
from pykraft.server_common.errors import ApiError, error_header, fill_error, ok_header

# Kafka's bound on the preferred elections one automatic rebalance writes (one batch).
ELECTIONS_PER_BALANCE_MAX: Final = 1000

_Target = tuple[str, int, TopicImage | None]


def preferred_election(
    topic: TopicImage,
    partition_id: int,
    partition: PartitionRegistration,
    can_lead: Callable[[int], bool],
) -> PartitionChangeRecord | ApiError:
    """The record making the preferred replica leader, or why there is none."""
    preferred = partition.replicas[0]
    if partition.leader == preferred:
        return ApiError(
            common_pb2.ELECTION_NOT_NEEDED,
            f"broker {preferred}, the preferred replica, already leads the partition",
        )
    if preferred not in partition.isr or not can_lead(preferred):
        return ApiError(
            common_pb2.PREFERRED_LEADER_NOT_AVAILABLE,
            f"the preferred replica {preferred} is not in the ISR {list(partition.isr)} "
            "or cannot lead (fenced or shutting down)",
        )
    return PartitionChangeRecord(topic.topic_id, partition_id, leader=preferred)


def leaders_allowed(image: MetadataImage) -> Callable[[int], bool]:
    """Whether a broker may lead: registered, unfenced and not shutting down."""
    return set(image.cluster.unfenced_broker_ids()).__contains__


def _targets(image: MetadataImage, request: admin_pb2.ElectLeadersRequest) -> Iterator[_Target]:
    """(topic name, partition id, topic or None) for each requested partition, once each, in
    request order; a topic named with no partitions stands for all of its partitions."""
    if not request.topic_partitions:
        for every_topic, partition_id, _ in partitions_in_order(image):
            yield every_topic.name, partition_id, every_topic
        return
    seen: set[tuple[str, int]] = set()
    for item in request.topic_partitions:
        topic = image.topics.get_by_name(item.topic)
        if item.partitions:
            ids: list[int] = list(item.partitions)
        else:
            ids = sorted(topic.partitions) if topic is not None else [-1]
        for partition_id in ids:
            if (item.topic, partition_id) not in seen:
                seen.add((item.topic, partition_id))
                yield item.topic, partition_id, topic


def elect_leaders(
    image: MetadataImage, request: admin_pb2.ElectLeadersRequest
) -> ControllerResult[admin_pb2.ElectLeadersResponse]:
    """Preferred leader election for the requested partitions (none named: every partition),
    with one result per partition; see the module docstring. Writing more records than one
    operation may hold fails the whole request with POLICY_VIOLATION and writes nothing."""
    if request.election_type != admin_pb2.ELECTION_TYPE_PREFERRED:
        error = ApiError(
            common_pb2.INVALID_REQUEST, f"unsupported election type {request.election_type}"
        )
        return ControllerResult((), admin_pb2.ElectLeadersResponse(header=error_header(error)))
    can_lead = leaders_allowed(image)
    records = RecordBuffer()
    response = admin_pb2.ElectLeadersResponse(header=ok_header())
    try:
        for name, partition_id, topic in _targets(image, request):
            result = response.results.add(topic=name, partition=partition_id)
            partition = topic.partitions.get(partition_id) if topic is not None else None
            if topic is None or partition is None:
                result.error_code = common_pb2.UNKNOWN_TOPIC_OR_PARTITION
                result.error_message = f"no partition {partition_id} of topic {name!r}"
                continue
            outcome = preferred_election(topic, partition_id, partition, can_lead)
            if isinstance(outcome, ApiError):
                fill_error(result, outcome)
            else:
                records.extend((outcome,))
    except OperationTooLarge as too_large:
        failed = admin_pb2.ElectLeadersResponse(header=error_header(too_large))
        return ControllerResult((), failed)
    return ControllerResult(records.freeze(), response)


def balance_partition_leaders(
    image: MetadataImage, elections_max: int = ELECTIONS_PER_BALANCE_MAX
) -> ControllerResult[None]:
    """The automatic rebalance: preferred elections for up to `elections_max` partitions whose
    preferred replica can lead but does not, by preferred replica id (then the image's index
    order). It looks only at the partitions the image keeps as imbalanced, and skips whole
    brokers that cannot lead, so a balanced million-partition cluster costs nothing."""
    assert elections_max > 0
    can_lead = leaders_allowed(image)
    records: list[PartitionChangeRecord] = []
    topics = image.topics
    for broker_id in topics.imbalanced_brokers():
        if not can_lead(broker_id):
            continue
        for topic_id, partition_id in topics.imbalanced_partitions(broker_id):
            topic = topics.by_id[topic_id]
            partition = topic.partitions[partition_id]
            outcome = preferred_election(topic, partition_id, partition, can_lead)
            if isinstance(outcome, PartitionChangeRecord):
                records.append(outcome)
                if len(records) == elections_max:
                    return ControllerResult(tuple(records), None)
    return ControllerResult(tuple(records), None)
