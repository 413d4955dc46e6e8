"""What the in-process gRPC fakes of tests/unit/client share: serving unary methods, and the
answers every fake broker builds the same way from a map of partition leaders and record
timestamps (DescribeTopics, ListOffsets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import grpc
from google.protobuf.message import Message

from pykraft.client.types import TopicPartition
from pykraft.proto import admin_pb2, broker_pb2, common_pb2

# What gRPC calls for one method: (request, context) -> the answer.
UnaryHandler = Callable[[Any, grpc.ServicerContext], Message]


def unary_service(
    service: str, methods: Mapping[str, tuple[Any, UnaryHandler]]
) -> grpc.GenericRpcHandler[Any, Any]:
    """A handler to add to a server, serving `service` (e.g. "pykraft.BrokerService"): each
    method name maps to (request message type, handler); the request is parsed with the type's
    FromString, the handler called as gRPC calls it, and its answer serialized."""
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            handler,
            request_deserializer=request_type.FromString,
            response_serializer=lambda m: m.SerializeToString(),
        )
        for name, (request_type, handler) in methods.items()
    }
    return grpc.method_handlers_generic_handler(service, handlers)


def describe_topics_answer(
    names: Iterable[str],
    leaders: Mapping[TopicPartition, int],
    partition_fields: Callable[[TopicPartition], Mapping[str, Any]] | None = None,
) -> admin_pb2.DescribeTopicsResponse:
    """DescribeTopics for `names` as a broker forwarding to the controller answers it: each topic
    with id "id-<name>", its partitions in order with their leader (also the only replica), plus
    `partition_fields(tp)` where given; a topic with no partition in `leaders` is answered
    UNKNOWN_TOPIC_OR_PARTITION."""
    response = admin_pb2.DescribeTopicsResponse()
    for name in names:
        topic = response.topics.add(name=name, topic_id=f"id-{name}")
        partitions = sorted(tp for tp in leaders if tp.topic == name)
        if not partitions:
            topic.error_code = common_pb2.UNKNOWN_TOPIC_OR_PARTITION
            topic.error_message = f"Unknown topic {name!r}."
        for tp in partitions:
            leader = leaders[tp]
            extra = partition_fields(tp) if partition_fields is not None else {}
            topic.partitions.add(partition=tp.partition, leader=leader, replicas=[leader], **extra)
    return response


def list_offsets_answer(
    request: broker_pb2.ListOffsetsRequest,
    answer_partition: Callable[[TopicPartition, Any, broker_pb2.ListOffsetsPartitionResult], None],
) -> broker_pb2.ListOffsetsResponse:
    """ListOffsets answered partition by partition, in the request's order: each answer starts
    with timestamp -1 and offset -1, and `answer_partition(tp, partition request, answer)` fills
    it in."""
    response = broker_pb2.ListOffsetsResponse()
    for topic in request.topics:
        result = response.topics.add(topic=topic.topic)
        for p in topic.partitions:
            answer = result.partitions.add(partition=p.partition, timestamp=-1, offset=-1)
            answer_partition(TopicPartition(topic.topic, p.partition), p, answer)
    return response


def answer_list_offsets(
    answer: broker_pb2.ListOffsetsPartitionResult,
    timestamp: int,
    log_start: int,
    timestamps: Sequence[int],
) -> None:
    """Sets `answer`'s offset for ListOffsets `timestamp` on a log from `log_start` whose record
    at offset o has timestamp `timestamps[o]` (the log end is their count): -2 the log start,
    -1 the log end, otherwise the first offset from the start with a timestamp >= `timestamp`,
    with that timestamp (none such: `answer` is left as it is)."""
    if timestamp == -2:
        answer.offset = log_start
    elif timestamp == -1:
        answer.offset = len(timestamps)
    else:
        found = [(o, ts) for o, ts in enumerate(timestamps) if o >= log_start and ts >= timestamp]
        if found:
            answer.offset, answer.timestamp = found[0]
