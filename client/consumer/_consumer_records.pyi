"""Types of _consumer_records.pyx; fetch_buffer.consumer_records_python is its twin."""

from pykraft.client.types import ConsumerRecord
from pykraft.proto.record_batch import Record, TimestampType

def consumer_records(
    topic: str,
    partition: int,
    timestamp_type: TimestampType,
    records: list[Record],
    position: int,
) -> list[ConsumerRecord]: ...
