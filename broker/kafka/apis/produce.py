"""Produce (key 0), v3-9: record batches pass through as bytes to the broker's produce path
(`broker.produce.produce_records`, which the gRPC Produce shares), which checks each batch's
magic, CRC and producer sequence from its header and patches base offset and leader epoch
without parsing the records (uncompressed batches of a topic that is not compacted; others are
decoded for their record timestamps and keys, as Kafka's LogValidator does).

Copies of each record byte on the way in (counted from the code): recv (socket -> user), the
StreamReader's buffer, `readexactly`'s bytes, kio's read of the records field (the bytes object
this handler hands on as it is), then write (user -> page cache; the log copies only each batch's
61-byte header to patch offsets and epoch, and writes it and the rest of the batch with one
writev): 3 in user space and 2 kernel crossings, plus one read of the batch for its CRC-32C.
Fewer would take decoding the frame in place (memoryviews).

As Kafka's ProduceRequest.validateRecords, each partition's records must be exactly one batch
(v3+), else INVALID_RECORD for that partition and nothing of it is written.

acks=0: Kafka sends no response at all, so the handler returns None after appending, and the
listener must send nothing for that request (it still answers later requests in order). The
transactional id is not looked at: pykraft has no transactions, and a producer cannot get a
transactional producer id here (see init_producer_id).
"""

from __future__ import annotations

from typing import Any, Final

from pykraft.broker.kafka.api import Api, RequestContext
from pykraft.broker.kafka.apis.request_items import (
    in_request_order,
    per_topic,
    values_unless_failed,
)
from pykraft.broker.kafka.entities import (
    build,
    kafka_message,
    millis,
    response_module,
    timestamp_or_none,
)
from pykraft.broker.produce import PartitionRecords, produce_records
from pykraft.proto import broker_pb2, common_pb2
from pykraft.proto.record_batch import BatchError, iter_batches

PRODUCE_KEY: Final = 0
NO_ACKS: Final = 0
_ONE_BATCH = "a produce request (v3+) must hold exactly one record batch per partition"


def handle(ctx: RequestContext, request: Any) -> Any:
    """The Produce response at the request's version, or None for acks=0 (no response)."""
    services = ctx.services
    partitions = [
        PartitionRecords(topic.name, data.index, data.records or b"")  # kio's bytes, not a copy
        for topic in request.topic_data
        for data in topic.partition_data
    ]
    refused = {
        i: broker_pb2.ProducePartitionResult(
            partition=item.partition, error_code=common_pb2.INVALID_RECORD, error_message=_ONE_BATCH
        )
        for i, item in enumerate(partitions)
        if _batch_count(item.records) != 1
    }
    appended = produce_records(
        services.manager,
        (item for i, item in enumerate(partitions) if i not in refused),
        acks=request.acks,
        timeout_ms=millis(request.timeout),
        clock_ms=services.clock_ms,
        wall_clock_ms=services.wall_clock_ms,
    )
    if request.acks == NO_ACKS:
        return None
    results = iter(in_request_order(len(partitions), refused, appended))
    types = response_module(PRODUCE_KEY, ctx.api_version)
    return build(
        types.ProduceResponse,
        responses=per_topic(
            types.TopicProduceResponse,
            "name",
            "partition_responses",
            (
                (topic.name, [_partition(types, next(results)) for _ in topic.partition_data])
                for topic in request.topic_data
            ),
        ),
    )


def _batch_count(records: bytes) -> int:
    """How many batches `records` holds; 1 if its headers are unreadable, so the log answers
    with the precise error (CORRUPT_MESSAGE)."""
    try:
        return sum(1 for _ in iter_batches(records, verify=False))
    except BatchError:
        return 1


def _partition(types: Any, result: broker_pb2.ProducePartitionResult) -> Any:
    failed = result.error_code != common_pb2.NONE
    return build(
        types.PartitionProduceResponse,
        index=result.partition,
        error_code=result.error_code,
        **values_unless_failed(result, "base_offset", "log_start_offset"),
        log_append_time=None if failed else timestamp_or_none(result.log_append_time_ms),
        record_errors=(),
        error_message=kafka_message(result.error_message),
    )


APIS: Final = (Api(PRODUCE_KEY, 3, 9, handle),)
