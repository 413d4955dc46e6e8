"""InitProducerId (key 22), v0-4 (flexible v2+): producer ids for idempotent producers, from
the broker's allocator (`broker.producer_ids.handle_init_producer_id`).

As Kafka answers a producer without a transactional id: a fresh id with epoch 0, also when
the request (v3+) names the id and epoch it holds, which is how librdkafka and the Java client
bump the epoch after an unknown sequence (KIP-360; for an idempotent producer Kafka's bump is
a new id, so no epoch above 0 is ever given). An id without an epoch or an epoch without an id
is INVALID_REQUEST, as in Kafka. Not supported: transactions. A transactional id is answered
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Kafka's answer to a producer that may not use
transactional ids, which clients treat as fatal with a clear reason (the response has no
message field); a retriable code would make them retry forever. A broker that may not serve
(fenced, or out of touch with the quorum) or has no id in time: COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.api import Api, RequestContext
from pykraft.broker.kafka.entities import NO_VALUE, build, field_or, millis, response_module
from pykraft.broker.producer_ids import handle_init_producer_id
from pykraft.proto import broker_pb2

INIT_PRODUCER_ID_KEY: Final = 22


def handle(ctx: RequestContext, request: Any) -> Any:
    """The InitProducerId response at the request's version (module docstring)."""
    types = response_module(INIT_PRODUCER_ID_KEY, ctx.api_version)
    producer_id = field_or(request, "producer_id", NO_VALUE)
    producer_epoch = field_or(request, "producer_epoch", NO_VALUE)
    if request.transactional_id is not None:
        return _refused(types, ErrorCode.transactional_id_authorization_failed)
    if (producer_id == NO_VALUE) != (producer_epoch == NO_VALUE):
        return _refused(types, ErrorCode.invalid_request)
    services = ctx.services
    now_ms = services.clock_ms()
    proto = broker_pb2.InitProducerIdRequest(
        transaction_timeout_ms=millis(request.transaction_timeout),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )
    answer = handle_init_producer_id(
        services.producer_ids,
        proto,
        broker_id=services.config.node_id,
        may_serve=services.may_serve(now_ms),
        deadline_ms=now_ms + services.config.request_timeout_ms,
    )
    return build(
        types.InitProducerIdResponse,
        error_code=answer.header.error_code,
        producer_id=answer.producer_id,
        producer_epoch=answer.producer_epoch,
    )


def _refused(types: Any, code: ErrorCode) -> Any:
    return build(
        types.InitProducerIdResponse,
        error_code=code,
        producer_id=NO_VALUE,
        producer_epoch=NO_VALUE,
    )


APIS: Final = (Api(INIT_PRODUCER_ID_KEY, 0, 4, handle),)
