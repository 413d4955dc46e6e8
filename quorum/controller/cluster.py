"""Broker lifecycle decisions (KIP-631; Kafka's ClusterControlManager and heartbeat state machine).

A broker registers (fenced), heartbeats until it has replayed the log up to its own registration
and is unfenced, and leaves either by controlled shutdown (leaderships moved away first) or by
fencing when it asks, when its session expires, or when it comes back as a new incarnation.

The states, from the image: FENCED; UNFENCED; CONTROLLED_SHUTDOWN (unfenced, leading nothing
new, waiting to lead nothing at all). What a heartbeat does in each:
- FENCED: want_shut_down -> may shut down now; else caught up and not want_fence -> unfence.
- UNFENCED: want_fence -> fence; want_shut_down -> controlled shutdown while it leads
  partitions, else fenced and told to shut down; otherwise it leaves the ISR and leadership of
  the replicas it reports offline (a failed log directory).
- CONTROLLED_SHUTDOWN: once it leads nothing and every live broker has replayed the records
  that moved its leaderships (`HeartbeatTracker.shutdown_replicated`, as Kafka) -> fenced and
  told to shut down.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final
from uuid import UUID

from pykraft.metadata_log.image import BrokerRegistration, MetadataImage
from pykraft.metadata_log.records import (
    Endpoint,
    Record,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from pykraft.proto import admin_pb2, common_pb2, controller_pb2
from pykraft.quorum.controller.guards import check_broker_epoch, parse_uuid
from pykraft.quorum.controller.heartbeats import PARTITION_CHANGES_PER_STEP_MAX, HeartbeatTracker
from pykraft.quorum.controller.leadership import (
    controlled_shutdown_mark,
    leads_any_partition,
    records_for_offline_replicas,
    records_to_remove_from_isrs,
    records_to_unfence_broker,
)
from pykraft.quorum.controller.leaving import start_fences, step_leaving
from pykraft.quorum.controller.result import ControllerResult
from pykraft.server_common.errors import ApiError, error_header, ok_header

DEFAULT_SECURITY_PROTOCOL: Final = "PLAINTEXT"


def _registration_error(
    request: controller_pb2.BrokerRegistrationRequest, cluster_id: str
) -> ApiError | None:
    if request.cluster_id != cluster_id:
        return ApiError(
            common_pb2.INCONSISTENT_CLUSTER_ID,
            f"Expected cluster id {cluster_id!r}, but got {request.cluster_id!r}.",
        )
    if request.broker_id < 0:
        return ApiError(common_pb2.INVALID_REQUEST, f"Invalid broker id {request.broker_id}.")
    if parse_uuid(request.incarnation_id) is None:
        return ApiError(
            common_pb2.INVALID_REQUEST, f"Invalid incarnation id {request.incarnation_id!r}."
        )
    if not request.listeners:
        return ApiError(common_pb2.INVALID_REQUEST, "A broker must register at least one listener.")
    return None


def _endpoints(listeners: Iterable[controller_pb2.Listener]) -> tuple[Endpoint, ...]:
    return tuple(
        Endpoint(it.name, it.host, it.port, it.security_protocol or DEFAULT_SECURITY_PROTOCOL)
        for it in listeners
    )


def register_broker(
    image: MetadataImage,
    request: controller_pb2.BrokerRegistrationRequest,
    *,
    cluster_id: str,
    next_offset: int,
    session_alive: bool,
    partitions_max: int = PARTITION_CHANGES_PER_STEP_MAX,
) -> ControllerResult[controller_pb2.BrokerRegistrationResponse]:
    """Registers a broker, fenced, with broker epoch `next_offset`: the offset its
    RegisterBrokerRecord gets, since that record comes first in the result (Kafka's rule).

    The same incarnation registering again gets its current epoch back and writes nothing. A new
    incarnation is refused (DUPLICATE_BROKER_REGISTRATION) while the current one is unfenced and
    its session alive; otherwise it replaces it, and the old one leaves every ISR and leadership,
    since a restarted broker may have lost what it had not flushed: up to `partitions_max` of
    them here, the rest before its first unfencing heartbeat (`leaving.py`).
    """
    error = _registration_error(request, cluster_id)
    if error is not None:
        return ControllerResult((), _registration_reply(error=error))
    incarnation_id = parse_uuid(request.incarnation_id)
    assert incarnation_id is not None
    existing = image.cluster.broker(request.broker_id)
    if existing is not None and existing.incarnation_id == incarnation_id:
        return ControllerResult((), _registration_reply(broker_epoch=existing.broker_epoch))
    if existing is not None and session_alive and not existing.fenced:
        duplicate = ApiError(
            common_pb2.DUPLICATE_BROKER_REGISTRATION,
            f"Broker {request.broker_id} is registered by another live incarnation.",
        )
        return ControllerResult((), _registration_reply(error=duplicate))
    assert next_offset > image.offset, "the next record's offset must follow the image"
    record = RegisterBrokerRecord(
        request.broker_id,
        incarnation_id,
        broker_epoch=next_offset,
        endpoints=_endpoints(request.listeners),
        rack=request.rack or None,
        fenced=True,
    )
    records: list[Record] = [record]
    if existing is not None:
        records.extend(records_to_remove_from_isrs(image, (request.broker_id,), partitions_max))
    return ControllerResult(tuple(records), _registration_reply(broker_epoch=next_offset))


def _registration_reply(
    *, error: ApiError | None = None, broker_epoch: int = -1
) -> controller_pb2.BrokerRegistrationResponse:
    header = ok_header() if error is None else error_header(error)
    return controller_pb2.BrokerRegistrationResponse(header=header, broker_epoch=broker_epoch)


def _heartbeat_transition(
    image: MetadataImage,
    broker: BrokerRegistration,
    request: controller_pb2.BrokerHeartbeatRequest,
    sessions: HeartbeatTracker,
    *,
    caught_up: bool,
    now_ms: int,
    next_offset: int,
) -> tuple[list[Record], bool, bool]:
    """(records, fenced after them, should shut down) by the state table of the module."""
    broker_id = broker.broker_id
    if broker.fenced:
        if request.want_shut_down:
            return [], True, True
        if sessions.is_leaving(broker_id) or image.topics.partitions_in_isr(broker_id):
            # An earlier incarnation's ISRs are left first (the core goes on step by step).
            return start_fences(image, [broker_id], sessions, next_offset)[0], True, False
        if caught_up and not request.want_fence:
            return records_to_unfence_broker(image, broker_id), False, False
        return [], True, False
    if broker_id in sessions.fencing():
        return [], False, False  # fenced once its last step commits
    if request.want_fence and not broker.in_controlled_shutdown:
        records, fenced = start_fences(image, [broker_id], sessions, next_offset)
        return records, fenced, False
    if broker.in_controlled_shutdown or request.want_shut_down:
        return _controlled_shutdown(
            image, broker_id, sessions, now_ms=now_ms, next_offset=next_offset
        )
    return records_for_offline_replicas(image, broker_id, _offline(request)), False, False


def _controlled_shutdown(
    image: MetadataImage,
    broker_id: int,
    sessions: HeartbeatTracker,
    *,
    now_ms: int,
    next_offset: int,
) -> tuple[list[Record], bool, bool]:
    """The CONTROLLED_SHUTDOWN row of the state table: leaderships move away step by step, then
    the broker is fenced once every live broker has replayed the moves."""
    if leads_any_partition(image, broker_id):
        if sessions.is_leaving(broker_id):
            return [], False, False  # the core moves the rest, a step per turn
        records = controlled_shutdown_mark(image, broker_id)
        sessions.start_moving(broker_id)
        records += step_leaving(image, sessions, next_offset + len(records))
        return records, False, False
    if not sessions.shutdown_replicated(image, broker_id, now_ms):
        return [], False, False
    records, fenced = start_fences(image, [broker_id], sessions, next_offset)
    return records, fenced, fenced


def _offline(request: controller_pb2.BrokerHeartbeatRequest) -> dict[UUID, set[int]]:
    """The replicas the broker reports offline, by topic id (unparsable ids are skipped)."""
    offline: dict[UUID, set[int]] = {}
    for item in request.offline_replicas:
        topic_id = parse_uuid(item.topic_id)
        if topic_id is not None:
            offline.setdefault(topic_id, set()).update(item.partitions)
    return offline


def heartbeat(
    image: MetadataImage,
    request: controller_pb2.BrokerHeartbeatRequest,
    sessions: HeartbeatTracker,
    *,
    now_ms: int,
    next_offset: int,
) -> ControllerResult[controller_pb2.BrokerHeartbeatResponse]:
    """Moves the broker through the states of the module docstring; the response tells it its
    state as it will be once the returned records commit. A valid heartbeat renews the
    broker's session in `sessions` with the metadata offset it reports; `next_offset` is the
    offset the first returned record will get.

    `is_caught_up` means the broker has replayed the log up to its own registration.
    """
    error = check_broker_epoch(image, request.broker_id, request.broker_epoch)
    if error is not None:
        response = controller_pb2.BrokerHeartbeatResponse(
            header=error_header(error), is_fenced=True
        )
        return ControllerResult((), response)
    broker = image.cluster.broker(request.broker_id)
    assert broker is not None
    sessions.touch(request.broker_id, now_ms, request.current_metadata_offset)
    caught_up = request.current_metadata_offset >= broker.broker_epoch
    records, fenced, shut_down = _heartbeat_transition(
        image,
        broker,
        request,
        sessions,
        caught_up=caught_up,
        now_ms=now_ms,
        next_offset=next_offset,
    )
    response = controller_pb2.BrokerHeartbeatResponse(
        header=ok_header(), is_caught_up=caught_up, is_fenced=fenced, should_shut_down=shut_down
    )
    return ControllerResult(tuple(records), response)


def fence_expired_brokers(
    image: MetadataImage, expired_ids: Iterable[int], sessions: HeartbeatTracker, next_offset: int
) -> ControllerResult[None]:
    """Starts fencing the brokers whose session expired (those still registered and unfenced),
    together, moving their leaderships to live ISR members, and takes the next step of every
    broker leaving its partitions (`leaving.py`; no expired ids: that step alone)."""
    return ControllerResult(tuple(start_fences(image, expired_ids, sessions, next_offset)[0]), None)


def _unregister_error(image: MetadataImage, broker_id: int) -> ApiError | None:
    broker = image.cluster.broker(broker_id)
    if broker is None:
        return ApiError(common_pb2.BROKER_ID_NOT_REGISTERED, f"no broker {broker_id} is registered")
    if not broker.fenced:
        return ApiError(
            common_pb2.INVALID_REQUEST,
            f"broker {broker_id} is running: stop it before unregistering",
        )
    hosted = sorted(
        f"{topic.name}-{partition_id}"
        for topic in image.topics.by_id.values()
        for partition_id, partition in topic.partitions.items()
        if broker_id in partition.replicas
    )
    if hosted:
        return ApiError(
            common_pb2.INVALID_REQUEST,
            f"broker {broker_id} still hosts {len(hosted)} replicas (first: {hosted[:5]}); "
            "reassign them away first",
        )
    return None


def unregister_broker(
    image: MetadataImage, request: admin_pb2.UnregisterBrokerRequest
) -> ControllerResult[admin_pb2.UnregisterBrokerResponse]:
    """Kafka's UnregisterBroker, the last step of decommissioning: forgets a stopped (fenced)
    broker that hosts no replica, so no data can depend on it. BROKER_ID_NOT_REGISTERED for an
    unknown id, INVALID_REQUEST for a broker still running or hosting replicas."""
    error = _unregister_error(image, request.broker_id)
    if error is not None:
        return ControllerResult((), admin_pb2.UnregisterBrokerResponse(header=error_header(error)))
    broker = image.cluster.broker(request.broker_id)
    assert broker is not None
    record = UnregisterBrokerRecord(request.broker_id, broker.broker_epoch)
    return ControllerResult((record,), admin_pb2.UnregisterBrokerResponse(header=ok_header()))
