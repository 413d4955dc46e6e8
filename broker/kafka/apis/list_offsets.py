"""ListOffsets (key 2), v1-7, partition by partition through `broker.offsets.list_offset`
(which the gRPC ListOffsets shares): -2 the log start offset, -1 the latest (the high-water
mark, which is also the last stable offset, so read_committed answers the same), otherwise the
first offset whose timestamp is at least the one asked for (none: offset and timestamp -1). The
leader epoch (v4+) is checked against the partition's (FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH) and answered with the leader's.

Not supported: -3 (v7's max timestamp, KIP-734): INVALID_REQUEST, as for any other negative
timestamp the log does not know.
"""

from __future__ import annotations

from typing import Any, Final

from pykraft.broker.kafka.api import Api, KafkaServices, RequestContext
from pykraft.broker.kafka.apis.request_items import per_partition, values_unless_failed
from pykraft.broker.kafka.entities import NO_VALUE, build, field_or, response_module
from pykraft.broker.offsets import list_offset

LIST_OFFSETS_KEY: Final = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    """The ListOffsets response at the request's version: an offset or an error per partition."""
    types = response_module(LIST_OFFSETS_KEY, ctx.api_version)
    return build(
        types.ListOffsetsResponse,
        topics=per_partition(
            types.ListOffsetsTopicResponse,
            "name",
            "partitions",
            request.topics,
            lambda topic, data: _partition(types, ctx.services, topic, data),
        ),
    )


def _partition(types: Any, services: KafkaServices, topic: str, data: Any) -> Any:
    result = list_offset(
        services.manager,
        topic,
        data.partition_index,
        current_leader_epoch=field_or(data, "current_leader_epoch", NO_VALUE),
        timestamp=data.timestamp,
        now_ms=services.clock_ms(),
    )
    return build(
        types.ListOffsetsPartitionResponse,
        partition_index=result.partition,
        error_code=result.error_code,
        **values_unless_failed(result, "timestamp", "offset", "leader_epoch"),
    )


APIS: Final = (Api(LIST_OFFSETS_KEY, 1, 7, handle),)
