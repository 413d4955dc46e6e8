"""ListOffsets and Metadata.

ListOffsets answers on the leader: -2 the log start offset, -1 the high-water mark (consumers
see nothing above it), otherwise the first offset whose timestamp is at least the one asked for
(none: -1/-1; an answer at or above the high-water mark is hidden the same way). Metadata answers
from this broker's image on any broker, fenced or not, so clients can find the leaders.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from pykraft.broker.config import DATA_ENDPOINT_NAME
from pykraft.broker.log import LogError
from pykraft.broker.partition import Partition
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.metadata_log import MetadataImage, TopicImage
from pykraft.proto import broker_pb2, common_pb2
from pykraft.server_common.errors import fill_error

EARLIEST_TIMESTAMP: Final = -2
LATEST_TIMESTAMP: Final = -1


def handle_list_offsets(
    manager: ReplicaManager, request: broker_pb2.ListOffsetsRequest, clock_ms: Callable[[], int]
) -> broker_pb2.ListOffsetsResponse:
    """The gRPC ListOffsets: `list_offset` of each partition of the request, in its order."""
    response = broker_pb2.ListOffsetsResponse()
    for topic in request.topics:
        response.topics.add(
            topic=topic.topic,
            partitions=[
                list_offset(
                    manager,
                    topic.topic,
                    item.partition,
                    current_leader_epoch=item.current_leader_epoch,
                    timestamp=item.timestamp,
                    now_ms=clock_ms(),
                )
                for item in topic.partitions
            ],
        )
    return response


def list_offset(
    manager: ReplicaManager,
    topic: str,
    partition_id: int,
    *,
    current_leader_epoch: int,
    timestamp: int,
    now_ms: int,
) -> broker_pb2.ListOffsetsPartitionResult:
    """The offset for `timestamp` (module docstring) of a partition this broker leads, and its
    leader epoch; with the error code and -1 offset and timestamp if it does not lead, or
    `current_leader_epoch` (-1: any) is not the leader's."""
    result = broker_pb2.ListOffsetsPartitionResult(partition=partition_id, timestamp=-1, offset=-1)
    try:
        partition = manager.leader(topic, partition_id, now_ms)
        epoch_error = partition.epoch_error(current_leader_epoch)
        if epoch_error is not None:
            raise epoch_error
        _list_offset(partition, timestamp, result)
    except LogError as error:
        fill_error(result, error)
    return result


def _list_offset(
    partition: Partition, timestamp: int, result: broker_pb2.ListOffsetsPartitionResult
) -> None:
    result.leader_epoch = partition.leader_epoch
    if timestamp == EARLIEST_TIMESTAMP:
        result.offset = partition.log_start_offset
    elif timestamp == LATEST_TIMESTAMP:
        result.offset = partition.high_watermark
    elif timestamp < 0:
        raise LogError(common_pb2.INVALID_REQUEST, f"no such special timestamp {timestamp}")
    else:
        found = partition.committed_offset_for_timestamp(timestamp)
        if found is not None:
            result.offset, result.timestamp = found


def handle_metadata(
    image: MetadataImage, request: broker_pb2.MetadataRequest, cluster_id: str
) -> broker_pb2.MetadataResponse:
    response = broker_pb2.MetadataResponse(cluster_id=cluster_id, controller_id=-1)
    for broker_id in image.cluster.unfenced_broker_ids():
        broker = image.cluster.brokers[broker_id]
        endpoint = broker.endpoints[0]
        data = next((e for e in broker.endpoints if e.name == DATA_ENDPOINT_NAME), None)
        response.brokers.add(
            id=broker_id,
            host=endpoint.host,
            port=endpoint.port,
            rack=broker.rack or "",
            data_port=data.port if data is not None and data.host == endpoint.host else 0,
        )
    names = list(request.topics) or sorted(image.topics.by_name)
    for name in names:
        topic = image.topics.get_by_name(name)
        if topic is None:
            response.topics.add(
                name=name,
                error_code=common_pb2.UNKNOWN_TOPIC_OR_PARTITION,
                error_message=f"Unknown topic {name!r}.",
            )
            continue
        _topic_metadata(image, topic, response.topics.add(name=name, topic_id=str(topic.topic_id)))
    return response


def _topic_metadata(
    image: MetadataImage, topic: TopicImage, result: broker_pb2.TopicMetadata
) -> None:
    live = {broker_id for broker_id, b in image.cluster.brokers.items() if not b.fenced}
    for partition_id in sorted(topic.partitions):
        registration = topic.partitions[partition_id]
        offline = [r for r in registration.replicas if r not in live]
        result.partitions.add(
            partition=partition_id,
            error_code=(
                common_pb2.LEADER_NOT_AVAILABLE if registration.leader < 0 else common_pb2.NONE
            ),
            leader_id=registration.leader,
            leader_epoch=registration.leader_epoch,
            replicas=registration.replicas,
            isr=registration.isr,
            offline_replicas=offline,
        )
