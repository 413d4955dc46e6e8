from pykraft.proto.record_batch.columns import RecordColumns
from pykraft.proto.record_batch.header import BatchHeader

def decode_records(
    payload: bytes, header: BatchHeader, columns: RecordColumns, offset_min: int
) -> None: ...
