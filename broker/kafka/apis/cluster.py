"""DescribeCluster (60) v0-1: answered from this broker's metadata image, as Kafka brokers do.

The brokers listed are the registered, unfenced ones with a Kafka listener, at their Kafka
addresses (`kafka_endpoint`). Kafka clients cannot reach KRaft controllers, so, as a Kafka broker
does, the controller id names a listed broker (this one, or the lowest listed id when this one is
not listed; -1 when none is), to which clients send "controller" requests that it forwards.
A v1 request for controller endpoints (endpoint_type 2) belongs on a controller's listener and
is answered MISMATCHED_ENDPOINT_TYPE. Authorized operations are not computed
(pykraft has no authorizer): they are INT32_MIN, Kafka's "not provided".
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.api import Api, RequestContext, kafka_endpoint
from pykraft.broker.kafka.entities import NO_THROTTLE, response_module

DESCRIBE_CLUSTER: Final = 60
BROKERS_ENDPOINT_TYPE: Final = 1
AUTHORIZED_OPERATIONS_UNKNOWN: Final = -(2**31)


def describe_cluster(ctx: RequestContext, request: Any) -> Any:
    """The cluster id, this broker as controller, and the brokers clients may talk to."""
    module = response_module(DESCRIBE_CLUSTER, ctx.api_version)
    config = ctx.services.config
    fields: dict[str, Any] = {}
    if ctx.api_version >= 1:
        fields["endpoint_type"] = request.endpoint_type
        if request.endpoint_type != BROKERS_ENDPOINT_TYPE:
            return module.DescribeClusterResponse(
                throttle_time=NO_THROTTLE,
                error_code=ErrorCode.mismatched_endpoint_type,
                error_message="The request was sent to a broker's listener, not a controller's.",
                cluster_id=config.cluster_id,
                controller_id=-1,
                brokers=(),
                **fields,
            )
    brokers = _brokers(ctx, module)
    listed = [broker.broker_id for broker in brokers]
    controller_id = config.node_id if config.node_id in listed else min(listed, default=-1)
    return module.DescribeClusterResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        cluster_id=config.cluster_id,
        controller_id=controller_id,
        brokers=brokers,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_UNKNOWN,
        **fields,
    )


def _brokers(ctx: RequestContext, module: Any) -> tuple[Any, ...]:
    image = ctx.services.manager.image
    brokers = []
    for broker_id in sorted(image.cluster.brokers):
        registration = image.cluster.brokers[broker_id]
        endpoint = kafka_endpoint(image, broker_id)
        if registration.fenced or endpoint is None:
            continue
        host, port = endpoint
        brokers.append(
            module.DescribeClusterBroker(
                broker_id=broker_id, host=host, port=port, rack=registration.rack
            )
        )
    return tuple(brokers)


APIS: tuple[Api, ...] = (Api(DESCRIBE_CLUSTER, 0, 1, describe_cluster),)
