"""Reading a snapshot's run of one topic's PartitionRecords straight into registrations: the hot
loop of a million-partition restore (a broker's stored image, a whole-image MetadataFetch, the
controller's snapshot), where decoding cost about 3.8 us and building about 2 us per partition.

`read_partition_run` is compiled (`_partition_records.pyx`, chosen by `pykraft.proto.extensions`
unless PYKRAFT_NO_EXTENSIONS is set) with `read_partition_run_python` as its twin. Both take the
frames of a batch (`codec.batch_record_count`) from `pos`, at most `count` of them, while each is
a PartitionRecord of the topic whose 16 id bytes are `topic_id` and of a partition id not yet in
`partitions`, adding each one's `PartitionRegistration` there; they return the position after
the last frame taken and how many they took. They stop at the first frame that is anything else,
including one that does not decode: the caller reads that frame the general way
(`codec.decode_frame`), which takes it or raises the codec's own error. The compiled one checks
the bytes as the codec does, so both take the same frames into the same registrations
(`test_partition_records.py`).
"""

from __future__ import annotations

from pykraft.metadata_log.codec import decode_frame
from pykraft.metadata_log.errors import CorruptRecordError
from pykraft.metadata_log.image import PartitionRegistration
from pykraft.metadata_log.records import PartitionRecord


def read_partition_run_python(
    data: bytes,
    pos: int,
    count: int,
    topic_id: bytes,
    partitions: dict[int, PartitionRegistration],
) -> tuple[int, int]:
    """See the module doc."""
    taken = 0
    while taken < count:
        try:
            record, end = decode_frame(data, pos, taken)
        except CorruptRecordError:
            break  # the caller's decode_frame raises it, with the frame's index in the batch
        if (
            not isinstance(record, PartitionRecord)
            or record.topic_id.bytes != topic_id
            or record.partition_id in partitions
        ):
            break
        partitions[record.partition_id] = PartitionRegistration.from_record(record)
        pos, taken = end, taken + 1
    return pos, taken
