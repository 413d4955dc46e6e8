"""The Kafka APIs the listener serves: one module per family, each exporting `APIS`, gathered in
`ALL_APIS`.

ApiVersions is not in `ALL_APIS`: the listener builds it from this list (`api_versions_api`), so
its table always names exactly what is served.
"""

from __future__ import annotations

from pykraft.broker.kafka.api import Api
from pykraft.broker.kafka.apis import (
    classic_groups,
    cluster,
    configs,
    fetch,
    group_admin,
    group_offsets,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
    topics,
)

ALL_APIS: tuple[Api, ...] = (
    *metadata.APIS,
    *produce.APIS,
    *fetch.APIS,
    *list_offsets.APIS,
    *init_producer_id.APIS,
    *offset_for_leader_epoch.APIS,
    *group_offsets.APIS,
    *group_admin.APIS,
    *classic_groups.APIS,
    *topics.APIS,
    *configs.APIS,
    *cluster.APIS,
)
