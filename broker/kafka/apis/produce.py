"""Produce (key 0), v3-9: record batches pass through as bytes to the broker's produce path
(`broker.produce.handle_produce`), which checks each batch's magic, CRC and producer sequence
from its header and patches base offset and leader epoch without parsing the records
(uncompressed batches of a topic that is not compacted; others are decoded for their record
timestamps and keys, as Kafka's LogValidator does).

Copies of each record byte on the way in (issue 14 §3, counted from the code): recv (socket ->
user), the StreamReader's buffer, `readexactly`'s bytes, kio's read of the records field, the
protobuf request's field set and read back (2), `bytearray` for patching offsets and epoch,
then write (user -> page cache): 6 in user space and 2 kernel crossings, plus one read of the
batch for its CRC-32C. Fewer would take decoding the frame in place (memoryviews) and handing
the log a mutable buffer without the protobuf request; not done.

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
from pykraft.broker.kafka.apis.request_items import per_topic, values_unless_failed
from pykraft.broker.kafka.entities import (
    build,
    kafka_message,
    millis,
    response_module,
    timestamp_or_none,
)
from pykraft.broker.produce import handle_produce
from pykraft.proto import broker_pb2, common_pb2
from pykraft.proto.record_batch import BatchError, iter_batches

PRODUCE_KEY: Final = 0
NO_ACKS: Final = 0
_ONE_BATCH = "a produce request (v3+) must hold exactly one record batch per partition"

_Results = dict[tuple[str, int], broker_pb2.ProducePartitionResult]


def handle(ctx: RequestContext, request: Any) -> Any:
    """The Produce response at the request's version, or None for acks=0 (no response)."""
    services = ctx.services
    proto, results = _to_proto(request)
    answer = handle_produce(
        services.manager, proto, services.clock_ms, wall_clock_ms=services.wall_clock_ms
    )
    if request.acks == NO_ACKS:
        return None
    for topic in answer.topics:
        results.update({(topic.topic, p.partition): p for p in topic.partitions})
    types = response_module(PRODUCE_KEY, ctx.api_version)
    return build(
        types.ProduceResponse,
        responses=per_topic(
            types.TopicProduceResponse,
            "name",
            "partition_responses",
            (
                (t.name, (_partition(types, results[t.name, d.index]) for d in t.partition_data))
                for t in request.topic_data
            ),
        ),
    )


def _to_proto(request: Any) -> tuple[broker_pb2.ProduceRequest, _Results]:
    """The broker's request for the partitions holding one batch each, and the results of
    those refused for not doing so."""
    proto = broker_pb2.ProduceRequest(acks=request.acks, timeout_ms=millis(request.timeout))
    refused: _Results = {}
    for topic in request.topic_data:
        item = proto.topics.add(topic=topic.name)
        for data in topic.partition_data:
            records = data.records or b""  # kio's Records is bytes: no copy here
            if _batch_count(records) == 1:
                item.partitions.add(partition=data.index, records=records)
            else:
                refused[topic.name, data.index] = broker_pb2.ProducePartitionResult(
                    partition=data.index,
                    error_code=common_pb2.INVALID_RECORD,
                    error_message=_ONE_BATCH,
                )
    return proto, refused


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
