"""Checks shared by several decisions: broker epochs, request UUIDs, duplicate items."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from uuid import UUID

from pykraft.metadata_log.image import MetadataImage
from pykraft.proto import common_pb2
from pykraft.server_common.errors import ApiError


def check_broker_epoch(image: MetadataImage, broker_id: int, broker_epoch: int) -> ApiError | None:
    """None when `broker_id` is registered with exactly `broker_epoch` (Kafka's checkBrokerEpoch).

    A request from an older incarnation carries an older epoch and must not act for the new one.
    """
    registration = image.cluster.broker(broker_id)
    if registration is None:
        return ApiError(
            common_pb2.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered."
        )
    if registration.broker_epoch != broker_epoch:
        return ApiError(
            common_pb2.STALE_BROKER_EPOCH,
            f"Expected broker epoch {registration.broker_epoch} for broker {broker_id}, "
            f"but got {broker_epoch}.",
        )
    return None


def parse_uuid(text: str) -> UUID | None:
    """The UUID written in `text` (any form `uuid.UUID` accepts), or None if it is not one."""
    try:
        return UUID(text)
    except ValueError:
        return None


def duplicates(names: Iterable[str]) -> frozenset[str]:
    """The names that occur more than once; Kafka refuses every occurrence of such a name."""
    return frozenset(name for name, count in Counter(names).items() if count > 1)
