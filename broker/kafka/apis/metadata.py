"""Metadata (key 3) v0-12: brokers at their advertised Kafka addresses, topics and partitions.

Topics and partitions come from `handle_metadata`, the gRPC Metadata's answer from this broker's
image (one source of truth for leaders, epochs, ISR, offline replicas and error codes); only the
broker list differs: every unfenced broker that registered a Kafka listener, at that address.
The controller id is this broker: Kafka clients send admin requests to it, and brokers forward
them to the active controller. `allow_auto_topic_creation` is ignored: pykraft does not create
topics on Metadata (Kafka 4's default). v0 asks for all topics with an empty list, v1+ with null
(an empty list is no topic); v12+ may name a topic by id alone (in v10-11, whose answers
cannot carry a null name, Kafka refuses that: INVALID_REQUEST, the name answered as "").
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from kio.schema.errors import ErrorCode

from pykraft.broker.group.config import OFFSETS_TOPIC
from pykraft.broker.kafka.api import Api, RequestContext, kafka_endpoint
from pykraft.broker.kafka.entities import NO_THROTTLE, build, response_module
from pykraft.broker.offsets import handle_metadata
from pykraft.metadata_log import MetadataImage
from pykraft.proto import broker_pb2

METADATA_KEY: Final = 3
# v10-11 carry topic ids but answer no null name: a topic named by id alone is refused there.
_TOPIC_IDS_VERSION_MIN: Final = 12


def _brokers(module: Any, image: MetadataImage) -> tuple[Any, ...]:
    brokers = []
    for broker_id in image.cluster.unfenced_broker_ids():
        endpoint = kafka_endpoint(image, broker_id)
        if endpoint is not None:
            rack = image.cluster.brokers[broker_id].rack or None
            host, port = endpoint
            brokers.append(
                build(
                    module.MetadataResponseBroker,
                    node_id=broker_id,
                    host=host,
                    port=port,
                    rack=rack,
                )
            )
    return tuple(brokers)


def _requested(
    request: Any, version: int, image: MetadataImage
) -> tuple[list[str] | None, list[uuid.UUID], list[uuid.UUID | None]]:
    """The topic names to describe (None: all), the topic ids asked for that are unknown, and
    before v12 the ids of topics named by id alone, which Kafka refuses there."""
    if request.topics is None or (version == 0 and not request.topics):
        return None, [], []
    names: list[str] = []
    unknown_ids: list[uuid.UUID] = []
    nameless: list[uuid.UUID | None] = []
    for topic in request.topics:
        topic_id = getattr(topic, "topic_id", None)
        if topic.name is not None:
            names.append(str(topic.name))
        elif version < _TOPIC_IDS_VERSION_MIN:
            nameless.append(topic_id)
        elif topic_id is not None and (found := image.topics.get(topic_id)) is not None:
            names.append(found.name)
        elif topic_id is not None:
            unknown_ids.append(topic_id)
    return names, unknown_ids, nameless


def _partition(module: Any, item: broker_pb2.PartitionMetadata) -> Any:
    return build(
        module.MetadataResponsePartition,
        error_code=ErrorCode(item.error_code),
        partition_index=item.partition,
        leader_id=item.leader_id,
        leader_epoch=item.leader_epoch,
        replica_nodes=tuple(item.replicas),
        isr_nodes=tuple(item.isr),
        offline_replicas=tuple(item.offline_replicas),
    )


def _topic(module: Any, error: ErrorCode, name: str | None, topic_id: Any, partitions: Any) -> Any:
    return build(
        module.MetadataResponseTopic,
        error_code=error,
        name=name,
        topic_id=topic_id,
        is_internal=name == OFFSETS_TOPIC,
        partitions=tuple(partitions),
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    """The Metadata response of `ctx.api_version` (the handler of the module docstring)."""
    module = response_module(METADATA_KEY, ctx.api_version)
    image = ctx.services.manager.image
    names, unknown_ids, nameless = _requested(request, ctx.api_version, image)
    topics = [_topic(module, ErrorCode.unknown_topic_id, None, i, ()) for i in unknown_ids]
    topics += [_topic(module, ErrorCode.invalid_request, "", i, ()) for i in nameless]
    if names is None or names:
        cluster_id = ctx.services.config.cluster_id
        answer = handle_metadata(image, broker_pb2.MetadataRequest(topics=names), cluster_id)
        for item in answer.topics:
            topic_id = uuid.UUID(item.topic_id) if item.topic_id else None
            partitions = (_partition(module, p) for p in item.partitions)
            error = ErrorCode(item.error_code)
            topics.append(_topic(module, error, item.name, topic_id, partitions))
    return build(
        module.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=_brokers(module, image),
        cluster_id=ctx.services.config.cluster_id,
        controller_id=ctx.services.config.node_id,
        topics=tuple(topics),
    )


APIS: Final = (Api(METADATA_KEY, 0, 12, handle),)
