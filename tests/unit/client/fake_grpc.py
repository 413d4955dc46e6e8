"""What the in-process gRPC fakes of tests/unit/client share: serving unary methods, running
servers, and the answers every fake broker builds the same way from its partitions' leaders and
record timestamps (DescribeTopics, Metadata, ListOffsets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

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


@contextmanager
def started(servers: Iterable[grpc.Server]) -> Iterator[None]:
    """Starts every server; on the way out, however the block ends, stops them all at once
    (no grace: calls still running are cancelled)."""
    servers = list(servers)
    for server in servers:
        server.start()
    try:
        yield
    finally:
        for server in servers:
            server.stop(grace=None)


class FakeLogs(Protocol):
    """The partitions a fake cluster holds: each one's leader, log start and record timestamps
    (the record at offset o has timestamps[tp][o]; the log end is their count)."""

    leaders: dict[TopicPartition, int]
    log_start: dict[TopicPartition, int]
    timestamps: dict[TopicPartition, list[int]]

    def topics(self) -> list[str]: ...


# A partition's answer fields beyond partition, leader and replicas.
PartitionFields = Callable[[TopicPartition], Mapping[str, Any]]


def _partitions(logs: FakeLogs, topic: str) -> list[TopicPartition]:
    return sorted(tp for tp in logs.leaders if tp.topic == topic)


def describe_topics_answer(
    request: Any, logs: FakeLogs, partition_fields: PartitionFields | None = None
) -> admin_pb2.DescribeTopicsResponse:
    """DescribeTopics (for the names asked, or every topic) as a broker forwarding to the
    controller answers it: each topic with id "id-<name>", its partitions in order with their
    leader (also the only replica), plus `partition_fields(tp)` where given; a topic with no
    partition is answered UNKNOWN_TOPIC_OR_PARTITION."""
    response = admin_pb2.DescribeTopicsResponse()
    for name in request.names or logs.topics():
        topic = response.topics.add(name=name, topic_id=f"id-{name}")
        partitions = _partitions(logs, name)
        if not partitions:
            topic.error_code = common_pb2.UNKNOWN_TOPIC_OR_PARTITION
            topic.error_message = f"Unknown topic {name!r}."
        for tp in partitions:
            leader = logs.leaders[tp]
            extra = partition_fields(tp) if partition_fields is not None else {}
            topic.partitions.add(partition=tp.partition, leader=leader, replicas=[leader], **extra)
    return response


def metadata_answer(
    request: Any,
    logs: FakeLogs,
    brokers: Iterable[tuple[int, int]],
    partition_fields: PartitionFields,
) -> broker_pb2.MetadataResponse:
    """Metadata (for the topics asked, or every topic) of cluster "c": `brokers` as (id, port)
    on 127.0.0.1, and each topic's partitions in order with their leader plus
    `partition_fields(tp)`; a topic with no partition is answered UNKNOWN_TOPIC_OR_PARTITION."""
    response = broker_pb2.MetadataResponse(cluster_id="c")
    for node_id, port in brokers:
        response.brokers.add(id=node_id, host="127.0.0.1", port=port)
    for name in request.topics or logs.topics():
        topic = response.topics.add(name=name)
        partitions = _partitions(logs, name)
        if not partitions:
            topic.error_code = common_pb2.UNKNOWN_TOPIC_OR_PARTITION
        for tp in partitions:
            topic.partitions.add(
                partition=tp.partition, leader_id=logs.leaders[tp], **partition_fields(tp)
            )
    return response


def list_offsets_answer(
    request: Any,
    logs: FakeLogs,
    error: Callable[[TopicPartition, Any], int],
    leader_epochs: Mapping[TopicPartition, int] | None = None,
) -> broker_pb2.ListOffsetsResponse:
    """ListOffsets answered partition by partition, in the request's order: `error(tp, partition
    request)` where it is not NONE, otherwise the partition's leader epoch (where
    `leader_epochs` is given) and the offset `_find_offset` says (offset and timestamp -1 where
    it finds none)."""
    response = broker_pb2.ListOffsetsResponse()
    for topic in request.topics:
        result = response.topics.add(topic=topic.topic)
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition)
            answer = result.partitions.add(partition=p.partition, timestamp=-1, offset=-1)
            code = error(tp, p)
            if code != common_pb2.NONE:
                answer.error_code = code  # type: ignore[assignment]
                continue
            if leader_epochs is not None:
                answer.leader_epoch = leader_epochs[tp]
            _find_offset(answer, p.timestamp, logs.log_start[tp], logs.timestamps[tp])
    return response


def _find_offset(
    answer: broker_pb2.ListOffsetsPartitionResult,
    timestamp: int,
    log_start: int,
    timestamps: Sequence[int],
) -> None:
    """Sets `answer`'s offset for ListOffsets `timestamp`: -2 the log start, -1 the log end,
    otherwise the first offset from the start with a timestamp >= `timestamp`, with that
    timestamp (none such: `answer` is left as it is)."""
    if timestamp == -2:
        answer.offset = log_start
    elif timestamp == -1:
        answer.offset = len(timestamps)
    else:
        found = [(o, ts) for o, ts in enumerate(timestamps) if o >= log_start and ts >= timestamp]
        if found:
            answer.offset, answer.timestamp = found[0]
