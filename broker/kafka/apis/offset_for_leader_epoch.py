"""OffsetForLeaderEpoch (key 23), v2-4, in both forms: consumers validating their position after
a leader change (KIP-320) and followers (v3+ names a replica id) ask the same question of the
leader, so both are answered alike, from the partition's leader-epoch cache
(`Partition.end_offset_for_epoch`): the largest epoch at most the one asked for and its end
offset, or -1 and -1 when the log knows no such epoch, as Kafka.

Like Kafka, only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere, UNKNOWN_TOPIC_OR_PARTITION
for a partition no one hosts), and a current leader epoch other than the leader's is
FENCED_LEADER_EPOCH (older) or UNKNOWN_LEADER_EPOCH (newer); -1 skips that check. pykraft's own
followers learn where logs part from Fetch's diverging epoch (KIP-595) and never send this.
"""

from __future__ import annotations

from typing import Any, Final

from pykraft.broker.kafka.api import Api, RequestContext
from pykraft.broker.kafka.apis.request_items import per_partition
from pykraft.broker.kafka.entities import NO_VALUE, build, response_module
from pykraft.broker.log import LogError
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.proto import common_pb2

OFFSET_FOR_LEADER_EPOCH_KEY: Final = 23


def handle(ctx: RequestContext, request: Any) -> Any:
    """The OffsetForLeaderEpoch response at the request's version: an (epoch, end offset) or an
    error per partition."""
    services = ctx.services
    types = response_module(OFFSET_FOR_LEADER_EPOCH_KEY, ctx.api_version)
    return build(
        types.OffsetForLeaderEpochResponse,
        topics=per_partition(
            types.OffsetForLeaderTopicResult,
            "topic",
            "partitions",
            request.topics,
            lambda topic, item: _partition(
                types, services.manager, topic, item, services.clock_ms()
            ),
        ),
    )


def _partition(types: Any, manager: ReplicaManager, topic: str, item: Any, now_ms: int) -> Any:
    try:
        partition = manager.leader(topic, item.partition, now_ms)
        epoch_error = partition.epoch_error(item.current_leader_epoch)
        if epoch_error is not None:
            raise epoch_error
        epoch, end_offset = partition.end_offset_for_epoch(item.leader_epoch)
    except LogError as error:
        code, epoch, end_offset = error.error_code, NO_VALUE, NO_VALUE
    else:
        code = common_pb2.NONE
    return build(
        types.EpochEndOffset,
        error_code=code,
        partition=item.partition,
        leader_epoch=epoch,
        end_offset=end_offset,
    )


APIS: Final = (Api(OFFSET_FOR_LEADER_EPOCH_KEY, 2, 4, handle),)
