"""Fetch on the leader, for consumers (replica_id -1: up to the high-water mark) and for
followers (up to the log end; the fetch offset is the follower's log end). A fetcher whose last
fetched epoch parts from the leader's history before its fetch offset gets `diverging_epoch` and
no records (KIP-320), consumers as followers (Kafka's Partition.readRecords checks any fetch
naming a last fetched epoch), and before the offset is checked against the log: a consumer that
read records an unclean election lost must learn where the histories part, not be reset as if
it had merely run past the end. A follower below the log start gets OFFSET_OUT_OF_RANGE with the
leader's log start offset.

Limits as Kafka's: `partition_max_bytes` per partition and `max_bytes` in all, except that the
first batch found is returned whole even if larger (so a consumer always makes progress). With
less than `min_bytes` found and no error, the fetch waits up to `max_wait_ms` for appends.
"""

from __future__ import annotations

from collections.abc import Callable

from pykraft.broker.log import FileRange, LogError, RangeRead, ReadResult
from pykraft.broker.metrics import count_read
from pykraft.broker.replica_manager import LeaderError, ReplicaManager
from pykraft.proto import broker_pb2, common_pb2
from pykraft.server_common.errors import fill_error

CONSUMER_REPLICA_ID = -1
# The longest a Fetch may wait for records (Kafka's default request.timeout.ms: a client waiting
# longer would have given up).
FETCH_WAIT_MS_MAX = 30_000


# A partition's records in one pass: bytes, or (zero copy) a range of a segment file.
Records = bytes | FileRange
# Where a partition's FileRange belongs in the response: (topic index, partition index).
RangeSlot = tuple[int, int]


def handle_fetch(
    manager: ReplicaManager,
    request: broker_pb2.FetchRequest,
    clock_ms: Callable[[], int],
    wait_ms_max: int = FETCH_WAIT_MS_MAX,
) -> broker_pb2.FetchResponse:
    """Reads at once, or waits up to `max_wait_ms` for `min_bytes`, but never longer than
    `wait_ms_max` (the caller's deadline): a waiting Fetch holds one of the broker's request
    threads."""
    response, _ = _fetch(manager, request, clock_ms, wait_ms_max, zero_copy=False)
    return response


def handle_fetch_ranges(
    manager: ReplicaManager,
    request: broker_pb2.FetchRequest,
    clock_ms: Callable[[], int],
    wait_ms_max: int = FETCH_WAIT_MS_MAX,
) -> tuple[broker_pb2.FetchResponse, dict[RangeSlot, FileRange]]:
    """`handle_fetch` for consumers without reading a record: each partition's records are a
    FileRange (by the partition's place in the response; its `records` stay empty), for the
    Kafka listener to send with sendfile. The caller closes the ranges."""
    return _fetch(manager, request, clock_ms, wait_ms_max, zero_copy=True)


def _fetch(
    manager: ReplicaManager,
    request: broker_pb2.FetchRequest,
    clock_ms: Callable[[], int],
    wait_ms_max: int,
    *,
    zero_copy: bool,
) -> tuple[broker_pb2.FetchResponse, dict[RangeSlot, FileRange]]:
    deadline_ms = clock_ms() + min(max(request.max_wait_ms, 0), wait_ms_max)
    while True:
        version = manager.version
        ranges: dict[RangeSlot, FileRange] = {}
        try:
            response, size_bytes, failed = _read_all(
                manager, request, clock_ms(), ranges if zero_copy else None
            )
            if failed or size_bytes >= request.min_bytes or clock_ms() >= deadline_ms:
                _count_sent(request, response, ranges)
                return response, ranges
        except BaseException:
            _close(ranges)
            raise
        _close(ranges)
        manager.await_change(version, deadline_ms=deadline_ms, clock_ms=clock_ms)


def _count_sent(
    request: broker_pb2.FetchRequest,
    response: broker_pb2.FetchResponse,
    ranges: dict[RangeSlot, FileRange],
) -> None:
    """Counts the answer's record bytes per topic, once per Fetch (passes that wait for more
    are not answers)."""
    by_slot = [sum(len(p.records) for p in topic.partitions) for topic in response.topics]
    for (topic_slot, _), file_range in ranges.items():
        by_slot[topic_slot] += file_range.length
    consumer = request.replica_id == CONSUMER_REPLICA_ID
    for topic, size_bytes in zip(response.topics, by_slot, strict=True):
        if size_bytes:
            count_read(topic.topic, size_bytes, consumer=consumer)


def _close(ranges: dict[RangeSlot, FileRange]) -> None:
    for file_range in ranges.values():
        file_range.close()


def _read_all(
    manager: ReplicaManager,
    request: broker_pb2.FetchRequest,
    now_ms: int,
    ranges: dict[RangeSlot, FileRange] | None,
) -> tuple[broker_pb2.FetchResponse, int, bool]:
    """One pass over the partitions: the response, its record bytes, whether any failed. With
    `ranges`, consumers' records go there as FileRanges instead of into the response."""
    response = broker_pb2.FetchResponse()
    size_bytes, failed = 0, False
    for topic_slot, topic in enumerate(request.topics):
        topic_result = response.topics.add(topic=topic.topic)
        for partition_slot, item in enumerate(topic.partitions):
            result = topic_result.partitions.add(
                partition=item.partition, high_watermark=-1, last_stable_offset=-1
            )
            budget_bytes = min(item.partition_max_bytes, request.max_bytes - size_bytes)
            try:
                data = _read_one(
                    manager, request, topic.topic, item, result, now_ms, ranges is not None
                )
            except LogError as error:
                fill_error(result, error)
                if isinstance(error, LeaderError):
                    result.current_leader.CopyFrom(error.current_leader)
                failed = True
                continue
            if result.HasField("diverging_epoch"):
                failed = True  # answer at once: the follower truncates before fetching on
                continue
            data_bytes = data.length if isinstance(data, FileRange) else len(data)
            if data_bytes > max(budget_bytes, 0) and size_bytes > 0:
                if isinstance(data, FileRange):
                    data.close()
                continue  # over the request's budget: only the first batch may exceed it
            if isinstance(data, FileRange):
                assert ranges is not None
                ranges[topic_slot, partition_slot] = data
            else:
                result.records = data
            size_bytes += data_bytes
    return response, size_bytes, failed


def _read_one(
    manager: ReplicaManager,
    request: broker_pb2.FetchRequest,
    topic: str,
    item: broker_pb2.FetchPartition,
    result: broker_pb2.FetchPartitionResult,
    now_ms: int,
    zero_copy: bool,
) -> Records:
    replica_id = request.replica_id
    partition = manager.leader(topic, item.partition, now_ms)
    epoch_error = partition.epoch_error(item.current_leader_epoch)
    if epoch_error is not None:
        raise epoch_error
    # Set before reading: a follower answered OFFSET_OUT_OF_RANGE restarts at the log start.
    log_start_offset = result.log_start_offset = partition.log_start_offset
    result.high_watermark = partition.high_watermark
    consumer = replica_id == CONSUMER_REPLICA_ID
    if not consumer and item.fetch_offset < log_start_offset:
        raise LogError(
            common_pb2.OFFSET_OUT_OF_RANGE,
            f"offset {item.fetch_offset} is below the log start {log_start_offset}",
        )
    diverging = partition.diverging_epoch(item.last_fetched_epoch, item.fetch_offset)
    if diverging is not None:
        result.diverging_epoch.epoch, result.diverging_epoch.end_offset = diverging
        return b""
    bytes_max = max(item.partition_max_bytes, 0)
    read: ReadResult | RangeRead
    if consumer and zero_copy:
        read = partition.read_committed_range(item.fetch_offset, bytes_max=bytes_max)
    elif consumer:
        read = partition.read_committed(item.fetch_offset, bytes_max=bytes_max)
    else:
        read = partition.read(item.fetch_offset, bytes_max=bytes_max)
    result.high_watermark = read.high_watermark
    result.last_stable_offset = read.high_watermark
    result.log_start_offset = read.log_start_offset
    # Only an offset the leader holds tells it what the follower has (the read checked it).
    if not consumer:
        partition.on_follower_fetch(replica_id, item.fetch_offset, now_ms, request.replica_epoch)
    return b"" if read.data is None else read.data
