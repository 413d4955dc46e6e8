"""Fetch (key 1), v4-12 (the versions that name topics): consumers' reads through the broker's
fetch path (`broker.fetch.handle_fetch`), with its limits (max_wait_ms, min_bytes, max_bytes,
partition_max_bytes) and its leader-epoch and diverging-epoch checks (v9+, v12+).

Sessions (v7+, KIP-227): pykraft keeps none, and answers every fetch sessionless (session id
0), which Kafka allows: a full fetch (epoch 0, asking for a session, or -1, closing one) is
served in full, and the client, seeing session id 0, sends full fetches from then on. An
incremental fetch (epoch > 0) names a session this broker never created, so it gets
FETCH_SESSION_ID_NOT_FOUND, as from Kafka whose session cache lost it; the client then
starts over with a full fetch.

Isolation: without transactions read_committed reads what read_uncommitted does; the last
stable offset is the high-water mark and the aborted transactions are an empty list
(read_committed) or null (read_uncommitted), as Kafka sends them. Fetch from followers (KIP-392):
a v11+ fetch carries the consumer's rack (client.rack, maybe empty), so, as in Kafka, any
in-sync replica serves it and the leader may answer a preferred read replica; older versions
read from leaders only (-1). Replicas fetch over pykraft's gRPC protocol, so a fetch naming a
replica id (>= 0) gets NOT_LEADER_OR_FOLLOWER for each partition, Kafka's answer to a replica it
does not know.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kio.schema.errors import ErrorCode

from pykraft.broker.fetch import (
    CONSUMER_REPLICA_ID,
    RangeSlot,
    handle_fetch,
    handle_fetch_ranges,
)
from pykraft.broker.kafka.api import Api, RequestContext
from pykraft.broker.kafka.apis.request_items import per_topic, values_unless_failed
from pykraft.broker.kafka.entities import NO_VALUE, build, field_or, millis, response_module
from pykraft.broker.log import FileRange
from pykraft.proto import broker_pb2, common_pb2

FETCH_KEY: Final = 1
READ_COMMITTED: Final = 1
NO_SESSION: Final = 0
# Session epochs of a full fetch (KIP-227): 0 opens a session, -1 closes one or asks for none.
_FULL_FETCH_EPOCHS: Final = (0, -1)


def handle(ctx: RequestContext, request: Any) -> Any:
    """The Fetch response at the request's version: records or an error per partition, or
    FETCH_SESSION_ID_NOT_FOUND for the whole request (module docstring)."""
    return _answer(ctx, request, zero_copy=False)


def handle_with_ranges(ctx: RequestContext, request: Any) -> Any:
    """`handle`'s response with each partition's records as a FileRange of a segment file
    instead of bytes (`broker.fetch.handle_fetch_ranges`): only `fetch_frame` can encode it,
    for the listener to send with sendfile. The caller closes the ranges (FetchFrame.close)."""
    return _answer(ctx, request, zero_copy=True)


def _answer(ctx: RequestContext, request: Any, *, zero_copy: bool) -> Any:
    types = response_module(FETCH_KEY, ctx.api_version)
    if field_or(request, "session_epoch", -1) not in _FULL_FETCH_EPOCHS:
        return build(
            types.FetchResponse,
            error_code=ErrorCode.fetch_session_id_not_found,
            session_id=NO_SESSION,
            responses=(),
        )
    ranges: dict[RangeSlot, FileRange] = {}
    if request.replica_id >= 0:
        answer = _refuse_replica(request)
    elif zero_copy:
        services = ctx.services
        answer, ranges = handle_fetch_ranges(
            services.manager, _to_proto(request), services.clock_ms
        )
    else:
        services = ctx.services
        answer = handle_fetch(services.manager, _to_proto(request), services.clock_ms)
    aborted = () if request.isolation_level == READ_COMMITTED else None
    return build(
        types.FetchResponse,
        error_code=ErrorCode.none,
        session_id=NO_SESSION,
        responses=per_topic(
            types.FetchableTopicResponse,
            "topic",
            "partitions",
            (
                (
                    topic.topic,
                    (
                        _partition(types, p, aborted, ranges.get((t, i), p.records))
                        for i, p in enumerate(topic.partitions)
                    ),
                )
                for t, topic in enumerate(answer.topics)
            ),
        ),
    )


def _to_proto(request: Any) -> broker_pb2.FetchRequest:
    proto = broker_pb2.FetchRequest(
        replica_id=CONSUMER_REPLICA_ID,
        max_wait_ms=millis(request.max_wait),
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        rack_id=field_or(request, "rack_id", None),
    )
    _to_proto_topics(proto.topics, request, _asked)
    return proto


def _to_proto_topics(
    proto_topics: Any, request: Any, partition_fields: Callable[[Any], dict[str, Any]]
) -> None:
    """Adds to `proto_topics` (a FetchRequest's or FetchResponse's) one topic per topic of the
    Kafka request, in order, each with one partition per partition the request names, whose
    fields `partition_fields(kio's partition entity)` gives."""
    for topic in request.topics:
        item = proto_topics.add(topic=topic.topic)
        for data in topic.partitions:
            item.partitions.add(**partition_fields(data))


def _asked(data: Any) -> dict[str, Any]:
    """A FetchPartition as the broker's FetchPartition's fields."""
    return {
        "partition": data.partition,
        "current_leader_epoch": field_or(data, "current_leader_epoch", NO_VALUE),
        "fetch_offset": data.fetch_offset,
        "last_fetched_epoch": field_or(data, "last_fetched_epoch", NO_VALUE),
        "log_start_offset": NO_VALUE,
        "partition_max_bytes": data.partition_max_bytes,
    }


def _refuse_replica(request: Any) -> broker_pb2.FetchResponse:
    answer = broker_pb2.FetchResponse()
    _to_proto_topics(answer.topics, request, _replica_refused)
    return answer


def _replica_refused(data: Any) -> dict[str, Any]:
    return {"partition": data.partition, "error_code": common_pb2.NOT_LEADER_OR_FOLLOWER}


def _partition(
    types: Any, result: broker_pb2.FetchPartitionResult, aborted: Any, records: bytes | FileRange
) -> Any:
    optional: dict[str, Any] = {}
    # Both are tagged fields of v12+: older versions' modules have no class for them.
    if result.HasField("diverging_epoch") and hasattr(types, "EpochEndOffset"):
        epoch = result.diverging_epoch
        optional["diverging_epoch"] = build(
            types.EpochEndOffset, epoch=epoch.epoch, end_offset=epoch.end_offset
        )
    if result.HasField("current_leader") and hasattr(types, "LeaderIdAndEpoch"):
        leader = result.current_leader
        optional["current_leader"] = build(
            types.LeaderIdAndEpoch, leader_id=leader.leader_id, leader_epoch=leader.leader_epoch
        )
    return build(
        types.PartitionData,
        partition_index=result.partition,
        error_code=result.error_code,
        **values_unless_failed(result, "high_watermark", "last_stable_offset", "log_start_offset"),
        aborted_transactions=aborted,
        preferred_read_replica=(
            result.preferred_read_replica if result.HasField("preferred_read_replica") else NO_VALUE
        ),
        records=records,
        **optional,
    )


APIS: Final = (Api(FETCH_KEY, 4, 12, handle),)
