"""Read-only answers computed from the image: no records, nothing to commit."""

from __future__ import annotations

from pykraft.metadata_log.configs import TOPIC_CONFIGS
from pykraft.metadata_log.image import MetadataImage, TopicImage
from pykraft.metadata_log.records import ConfigResourceType
from pykraft.proto import admin_pb2, common_pb2
from pykraft.quorum.controller.configs import config_entry
from pykraft.server_common.errors import ok_header


def _describe_topic(
    image: MetadataImage, topic: TopicImage, include_configs: bool
) -> admin_pb2.TopicDescription:
    description = admin_pb2.TopicDescription(name=topic.name, topic_id=str(topic.topic_id))
    for partition_id in sorted(topic.partitions):
        partition = topic.partitions[partition_id]
        description.partitions.add(
            partition=partition_id,
            leader=partition.leader,
            leader_epoch=partition.leader_epoch,
            partition_epoch=partition.partition_epoch,
            replicas=partition.replicas,
            isr=partition.isr,
        )
    if include_configs:
        description.configs.extend(
            config_entry(image, ConfigResourceType.TOPIC, topic.name, key)
            for key in sorted(TOPIC_CONFIGS)
        )
    return description


def describe_topics(
    image: MetadataImage, request: admin_pb2.DescribeTopicsRequest
) -> admin_pb2.DescribeTopicsResponse:
    """The named topics in request order (every topic, by name, when none is named); a missing
    name gets UNKNOWN_TOPIC_OR_PARTITION. With `include_configs`, every topic config with its
    effective value and source."""
    response = admin_pb2.DescribeTopicsResponse(header=ok_header())
    for name in list(request.names) or sorted(image.topics.by_name):
        topic = image.topics.get_by_name(name)
        if topic is None:
            response.topics.add(
                name=name,
                error_code=common_pb2.UNKNOWN_TOPIC_OR_PARTITION,
                error_message=f"Topic {name!r} does not exist.",
            )
        else:
            response.topics.append(_describe_topic(image, topic, request.include_configs))
    return response
