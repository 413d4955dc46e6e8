"""Reads about the quorum and the cluster, answered by the active controller from its own state."""

from __future__ import annotations

from pykraft.metadata_log.image import BrokerRegistration
from pykraft.proto import admin_pb2
from pykraft.quorum.events import ReadContext
from pykraft.quorum.replies import controller_listeners


def describe_cluster(context: ReadContext) -> admin_pb2.DescribeClusterResponse:
    response = admin_pb2.DescribeClusterResponse(
        cluster_id=context.config.cluster_id, controller_id=context.active_controller_id
    )
    listeners = controller_listeners(context.config, context.raft)
    for node_id, address in sorted(listeners.items()):
        response.controllers.add(
            id=node_id, address=address, is_active=node_id == context.active_controller_id
        )
    for broker in sorted(context.image.cluster.brokers.values(), key=lambda b: b.broker_id):
        response.brokers.add(
            id=broker.broker_id,
            address=_address(broker),
            rack=broker.rack or "",
            state=broker_state(broker),
            epoch=broker.broker_epoch,
            incarnation_id=str(broker.incarnation_id),
        )
    return response


def broker_state(broker: BrokerRegistration) -> str:
    if broker.in_controlled_shutdown:
        return "controlled_shutdown"
    return "fenced" if broker.fenced else "unfenced"


def describe_quorum(context: ReadContext) -> admin_pb2.DescribeQuorumResponse:
    raft = context.raft
    listeners = controller_listeners(context.config, raft)
    response = admin_pb2.DescribeQuorumResponse(
        leader_id=context.active_controller_id,
        leader_epoch=raft.term,
        high_watermark=context.image.offset,
        observers=sorted(context.image.cluster.brokers),
    )
    for voter in sorted(raft.voters, key=lambda v: v.node_id):
        is_self = voter.node_id == raft.node_id
        match = raft.log_end_index if is_self else voter.match_index
        reachable = is_self or voter.connected
        response.voters.add(
            id=voter.node_id,
            address=listeners.get(voter.node_id) or voter.address,
            log_end_offset=-1 if match is None else match,
            lag=-1 if match is None else max(0, raft.log_end_index - match),
            status="Leader" if is_self else ("Follower" if reachable else "Unreachable"),
        )
    return response


def _address(broker: BrokerRegistration) -> str:
    if not broker.endpoints:
        return ""
    endpoint = broker.endpoints[0]
    return f"{endpoint.host}:{endpoint.port}"
