"""Types of the compiled codec (_codec.pyx); build.py and decode.py hold the Python twins."""

from collections.abc import Sequence

from pykraft.proto.record_batch.records import Record, RecordHeader

def encode_record(
    records: bytearray,
    timestamp_delta: int,
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[RecordHeader | tuple[str, bytes | None]],
) -> None: ...
def decode_records(
    data: bytes,
    base_offset: int,
    base_timestamp: int,
    log_append_ms: int,
    create_time: bool,
    last_delta: int,
    record_count: int,
) -> list[Record]: ...
