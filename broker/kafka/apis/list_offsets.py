"""ListOffsets (key 2), v1-7, through the broker's `broker.offsets.handle_list_offsets`: -2 the
log start offset, -1 the latest (the high-water mark, which is also the last stable offset, so
read_committed answers the same), otherwise the first offset whose timestamp is at least the one
asked for (none: offset and timestamp -1). The leader epoch (v4+) is checked against the
partition's (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH) and answered with the leader's.

Not supported: -3 (v7's max timestamp, KIP-734): INVALID_REQUEST, as for any other negative
timestamp the log does not know.
"""

from __future__ import annotations

from typing import Any, Final

from pykraft.broker.kafka.api import Api, RequestContext
from pykraft.broker.kafka.apis.request_items import (
    per_topic,
    to_proto_topics,
    values_unless_failed,
)
from pykraft.broker.kafka.entities import NO_VALUE, build, field_or, response_module
from pykraft.broker.offsets import handle_list_offsets
from pykraft.proto import broker_pb2

LIST_OFFSETS_KEY: Final = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    """The ListOffsets response at the request's version: an offset or an error per partition."""
    services = ctx.services
    answer = handle_list_offsets(services.manager, _to_proto(request), services.clock_ms)
    types = response_module(LIST_OFFSETS_KEY, ctx.api_version)
    return build(
        types.ListOffsetsResponse,
        topics=per_topic(
            types.ListOffsetsTopicResponse,
            "name",
            "partitions",
            ((t.topic, (_partition(types, p) for p in t.partitions)) for t in answer.topics),
        ),
    )


def _to_proto(request: Any) -> broker_pb2.ListOffsetsRequest:
    proto = broker_pb2.ListOffsetsRequest(
        replica_id=request.replica_id, isolation_level=field_or(request, "isolation_level", 0)
    )
    to_proto_topics(proto.topics, request.topics, "name", "partitions", _asked)
    return proto


def _asked(data: Any) -> dict[str, Any]:
    """A ListOffsetsPartition as the broker's ListOffsetsPartition's fields."""
    return {
        "partition": data.partition_index,
        "current_leader_epoch": field_or(data, "current_leader_epoch", NO_VALUE),
        "timestamp": data.timestamp,
    }


def _partition(types: Any, result: broker_pb2.ListOffsetsPartitionResult) -> Any:
    return build(
        types.ListOffsetsPartitionResponse,
        partition_index=result.partition,
        error_code=result.error_code,
        **values_unless_failed(result, "timestamp", "offset", "leader_epoch"),
    )


APIS: Final = (Api(LIST_OFFSETS_KEY, 1, 7, handle),)
