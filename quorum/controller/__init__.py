"""The active controller's decisions, as pure functions of the metadata image (Kafka's control
managers). Each write returns `ControllerResult(records, response)`: the caller appends the
records to the metadata log and sends the response once they commit. Reads return a response.
"""

from __future__ import annotations

from pykraft.quorum.controller.cluster import fence_expired_brokers, heartbeat, register_broker
from pykraft.quorum.controller.configs import describe_configs, incremental_alter_configs
from pykraft.quorum.controller.heartbeats import HeartbeatTracker
from pykraft.quorum.controller.leadership import records_to_unfence_broker
from pykraft.quorum.controller.leaving import start_fences
from pykraft.quorum.controller.placement import PlacementError, ReplicaPlacer, UsableBroker
from pykraft.quorum.controller.producer_ids import PRODUCER_ID_BLOCK_SIZE, allocate_producer_ids
from pykraft.quorum.controller.reads import describe_topics
from pykraft.quorum.controller.result import RECORDS_PER_OPERATION_MAX, ControllerResult
from pykraft.quorum.controller.topics import (
    alter_partition,
    create_partitions,
    create_topics,
    delete_topics,
)

__all__ = [
    "PRODUCER_ID_BLOCK_SIZE",
    "RECORDS_PER_OPERATION_MAX",
    "ControllerResult",
    "HeartbeatTracker",
    "PlacementError",
    "ReplicaPlacer",
    "UsableBroker",
    "allocate_producer_ids",
    "alter_partition",
    "create_partitions",
    "create_topics",
    "delete_topics",
    "describe_configs",
    "describe_topics",
    "fence_expired_brokers",
    "heartbeat",
    "incremental_alter_configs",
    "records_to_unfence_broker",
    "register_broker",
    "start_fences",
]
