"""Fetch, for consumers (replica_id -1: up to the high-water mark) and for
followers (up to the log end; the fetch offset is the follower's log end). A fetcher whose last
fetched epoch parts from the leader's history before its fetch offset gets `diverging_epoch` and
no records (KIP-320), consumers as followers (Kafka's Partition.readRecords checks any fetch
naming a last fetched epoch), and before the offset is checked against the log: a consumer that
read records an unclean election lost must learn where the histories part, not be reset as if
it had merely run past the end. A follower below the log start gets OFFSET_OUT_OF_RANGE with the
leader's log start offset.

Fetch from followers (KIP-392): a consumer fetch carrying a rack (`rack_id`, even empty) may
be served by any in-sync replica. A follower serves it up to the high-water mark it learned from
the leader, so a consumer never reads what is not committed; an offset between that mark and
its log end waits like one at the leader's mark (it is not out of range), one past its log end
is OFFSET_OUT_OF_RANGE, and a follower out of the ISR answers NOT_LEADER_OR_FOLLOWER: either
sends the consumer back to the leader. The leader answers such a fetch with
`preferred_read_replica` and no records, at once, when its replica.selector.class picks another
replica (`ReplicaManager.preferred_read_replica`).

Limits as Kafka's: `partition_max_bytes` per partition and `max_bytes` in all, except that the
first batch found is returned whole even if larger (so a consumer always makes progress). With
less than `min_bytes` found and no error, the fetch waits up to `max_wait_ms` for appends; a
follower's fetch is also answered when the high-water mark moved past what it was last sent
(`Partition.high_watermark_for` says when that news is due). A follower's answer leaves out the
idle partitions it holds whole (`_caught_up`), as Kafka's incremental fetch answers do (KIP-227):
with many partitions per leader, most of each fetch's work was saying "nothing new". In a
fetch session (KIP-227, `fetch_sessions`), a follower's fetch reads only what its session's
plan holds: the partitions the request names, and those that changed since last looked at.
Every answered Fetch is counted (`counters`).
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable
from typing import NamedTuple

from pykraft.broker import latency_trace
from pykraft.broker.counters import (
    CONSUMER_BYTES_OUT_TOTAL,
    FETCH_CONSUMER,
    FETCH_FOLLOWER,
    REPLICATION_BYTES_OUT_TOTAL,
    REQUESTS_TOTAL,
    Counters,
)
from pykraft.broker.fetch_sessions import FetchSession, Plan
from pykraft.broker.fetch_wire import Slot, SplicedFetch
from pykraft.broker.log import FileRange, LogError, RangeRead, ReadResult
from pykraft.broker.partition import Partition
from pykraft.broker.partition_watches import COMMITTED, Change, Key, Watch
from pykraft.broker.replica_lookup import LeaderError
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.proto import broker_pb2, common_pb2
from pykraft.server_common.errors import fill_error

CONSUMER_REPLICA_ID = -1
# The longest a Fetch may wait for records (Kafka's default request.timeout.ms: a client waiting
# longer would have given up).
FETCH_WAIT_MS_MAX = 30_000


# A partition's records in one pass: bytes, or (zero copy) a range of a segment file.
Records = bytes | FileRange
# Where a partition's FileRange belongs in the response: (topic index, partition index).
RangeSlot = Slot


class _Records(enum.Enum):
    """Where a pass puts each partition's records."""

    IN_MESSAGE = "in the message"  # the caller reads the response's `records` fields
    HELD = "held"  # beside the message, by slot (the gRPC answer splices them in)
    RANGES = "ranges"  # consumers' as FileRanges beside the message, others in it (sendfile)


def handle_fetch(
    manager: ReplicaManager,
    request: broker_pb2.FetchRequest,
    clock_ms: Callable[[], int],
    wait_ms_max: int = FETCH_WAIT_MS_MAX,
) -> broker_pb2.FetchResponse:
    """Reads at once, or waits up to `max_wait_ms` for `min_bytes`, but never longer than
    `wait_ms_max` (the caller's deadline): a waiting Fetch holds one of the broker's request
    threads, so it waits only while it holds one of `manager.fetch_waits`' slots."""
    response, _ = _fetch(manager, request, clock_ms, wait_ms_max, _Records.IN_MESSAGE)
    return response


def handle_fetch_spliced(
    manager: ReplicaManager,
    request: broker_pb2.FetchRequest,
    clock_ms: Callable[[], int],
    wait_ms_max: int = FETCH_WAIT_MS_MAX,
) -> SplicedFetch:
    """`handle_fetch` for the gRPC service: the records stay out of the message, and its
    serialization copies them once (`fetch_wire`)."""
    response, held = _fetch(manager, request, clock_ms, wait_ms_max, _Records.HELD)
    return SplicedFetch(response, {slot: r for slot, r in held.items() if isinstance(r, bytes)})


def handle_fetch_ranges(
    manager: ReplicaManager,
    request: broker_pb2.FetchRequest,
    clock_ms: Callable[[], int],
    wait_ms_max: int = FETCH_WAIT_MS_MAX,
) -> tuple[broker_pb2.FetchResponse, dict[RangeSlot, FileRange]]:
    """`handle_fetch` for consumers without reading a record: each partition's records are a
    FileRange (by the partition's place in the response; its `records` stay empty), for the
    Kafka listener to send with sendfile. The caller closes the ranges."""
    response, held = _fetch(manager, request, clock_ms, wait_ms_max, _Records.RANGES)
    return response, {slot: r for slot, r in held.items() if isinstance(r, FileRange)}


def _fetch(
    manager: ReplicaManager,
    request: broker_pb2.FetchRequest,
    clock_ms: Callable[[], int],
    wait_ms_max: int,
    where: _Records,
) -> tuple[broker_pb2.FetchResponse, dict[Slot, Records]]:
    """Looks; without an answer yet, waits on the request's partitions (a session's, for a
    follower in one) and looks again after each change of what it reads, or when news is
    due."""
    now_ms = clock_ms()
    deadline_ms = now_ms + min(max(request.max_wait_ms, 0), wait_ms_max)
    session: FetchSession | None = None
    named: list[Key] = []
    if request.replica_id != CONSUMER_REPLICA_ID and request.HasField("session_epoch"):
        try:
            session, named = manager.fetch_sessions.session_for(request, now_ms)
        except LogError as error:
            refused = broker_pb2.FetchResponse(session_id=request.session_id)
            fill_error(refused.header, error)
            _count(manager.counters, request, refused, [])
            return refused, {}
    waiting = False  # holds one of manager.fetch_waits' slots
    try:
        with _watching(manager, request, session) as watch:
            while True:
                watch.clear()  # before looking: a change during the look ends the wait at once
                held: dict[Slot, Records] = {}
                plan = _whole_plan(request) if session is None else session.plan(named)
                read = _look(manager, request, plan, clock_ms, held, where)
                if _answers(request, read, clock_ms(), deadline_ms):
                    return _answer(manager, request, session, read, held)
                if not waiting:
                    waiting = manager.fetch_waits.take()
                    if not waiting:  # every slot held: answer without waiting
                        return _answer(manager, request, session, read, held)
                _close(held)
                wake_ms = deadline_ms
                if read.answer_by_ms is not None:
                    wake_ms = min(wake_ms, read.answer_by_ms)
                watch.wait(deadline_ms=wake_ms, clock_ms=clock_ms)
    finally:
        if waiting:
            manager.fetch_waits.give_back()


def _watching(
    manager: ReplicaManager, request: broker_pb2.FetchRequest, session: FetchSession | None
) -> contextlib.AbstractContextManager[Watch]:
    """The watch a fetch waits on: its session's (watching all the session's partitions), or
    one over the partitions it names, for the changes it reads (a consumer reads committed
    records only: an append that moves only the log end is no news to it)."""
    if session is not None:
        return contextlib.nullcontext(session.watch)
    keys = [(t.topic, p.partition) for t in request.topics for p in t.partitions]
    interest = COMMITTED if request.replica_id == CONSUMER_REPLICA_ID else Change.ALL
    return manager.watches.watch(keys, interest)


def _whole_plan(request: broker_pb2.FetchRequest) -> Plan:
    """A fetch without a session reads every partition it names."""
    return [(t.topic, t.partitions) for t in request.topics]


def _look(
    manager: ReplicaManager,
    request: broker_pb2.FetchRequest,
    plan: Plan,
    clock_ms: Callable[[], int],
    held: dict[Slot, Records],
    where: _Records,
) -> _Pass:
    """`_read_all` now, closing what it held if it fails."""
    try:
        return _read_all(manager, request, plan, clock_ms(), held, where)
    except BaseException:
        _close(held)
        raise


def _answers(request: broker_pb2.FetchRequest, read: _Pass, now_ms: int, deadline_ms: int) -> bool:
    """Whether `read` is the answer: enough bytes, news due, or the wait's end."""
    due = read.answer_by_ms is not None and read.answer_by_ms <= now_ms
    return due or sum(read.topic_bytes) >= request.min_bytes or now_ms >= deadline_ms


def _answer(
    manager: ReplicaManager,
    request: broker_pb2.FetchRequest,
    session: FetchSession | None,
    read: _Pass,
    held: dict[Slot, Records],
) -> tuple[broker_pb2.FetchResponse, dict[Slot, Records]]:
    """Answers with `read`: notes the marks it carries to a follower, and what it left out
    to the follower's session, and counts it."""
    for partition, high_watermark in read.marks:
        partition.high_watermark_sent(request.replica_id, high_watermark)
    if session is not None:
        session.answered(read.left)
        read.response.session_id = session.session_id
    _count(manager.counters, request, read.response, read.topic_bytes)
    return read.response, held


def _count(
    counters: Counters,
    request: broker_pb2.FetchRequest,
    response: broker_pb2.FetchResponse,
    topic_bytes: list[int],
) -> None:
    """Counts the request answered and its record bytes by topic (a consumer's or a
    follower's), as `_read_all` measured them: reading `records` back would copy them."""
    consumer = request.replica_id == CONSUMER_REPLICA_ID
    counters.add(REQUESTS_TOTAL, request=FETCH_CONSUMER if consumer else FETCH_FOLLOWER)
    bytes_out = CONSUMER_BYTES_OUT_TOTAL if consumer else REPLICATION_BYTES_OUT_TOTAL
    for topic, size_bytes in zip(response.topics, topic_bytes, strict=True):
        counters.add(bytes_out, size_bytes, topic=topic.topic)


def _close(held: dict[Slot, Records]) -> None:
    for records in held.values():
        if isinstance(records, FileRange):
            records.close()


class _Pass(NamedTuple):
    """One look at every partition of a Fetch."""

    response: broker_pb2.FetchResponse
    topic_bytes: list[int]  # record bytes found, by topic
    # When to answer, records or not (a partition failed, or news for a follower; see
    # Partition.high_watermark_for): None if only records or the wait's end answer it.
    answer_by_ms: int | None
    marks: list[tuple[Partition, int]]  # the high-water marks an answer to a follower carries
    left: list[Key]  # partitions with records left out for the answer's size


def _read_all(
    manager: ReplicaManager,
    request: broker_pb2.FetchRequest,
    plan: Plan,
    now_ms: int,
    held: dict[Slot, Records],
    where: _Records,
) -> _Pass:
    """One pass over the partitions of `plan`. Records go into the response or `held`, as
    `where` says."""
    response = broker_pb2.FetchResponse()
    size_bytes, answer_by_ms = 0, None
    marks: list[tuple[Partition, int]] = []
    left: list[Key] = []
    topic_bytes = [0] * len(plan)
    # A follower's answer leaves out what has nothing new for it (see `_caught_up`).
    follower = request.replica_id != CONSUMER_REPLICA_ID and latency_trace.TRACE is None
    for topic_slot, (topic, items) in enumerate(plan):
        topic_result = response.topics.add(topic=topic)
        for item in items:
            partition_slot = len(topic_result.partitions)  # its place in the answer, if any
            result: broker_pb2.FetchPartitionResult | None = None
            budget_bytes = min(item.partition_max_bytes, request.max_bytes - size_bytes)
            try:
                partition = _served(manager, request, topic, item, now_ms)
                if follower and _caught_up(partition, request, item, now_ms):
                    continue
                result = _result(topic_result, item)
                data, due_ms = _read_one(
                    manager, request, partition, item, result, now_ms, marks, where
                )
            except LogError as error:
                result = _result(topic_result, item) if result is None else result
                fill_error(result, error)
                if isinstance(error, LeaderError):
                    result.current_leader.CopyFrom(error.current_leader)
                answer_by_ms = now_ms
                continue
            if due_ms is not None:
                answer_by_ms = due_ms if answer_by_ms is None else min(answer_by_ms, due_ms)
            if result.HasField("diverging_epoch"):
                answer_by_ms = now_ms  # the follower truncates before fetching on
                continue
            data_bytes = data.length if isinstance(data, FileRange) else len(data)
            if data_bytes > max(budget_bytes, 0) and size_bytes > 0:
                if isinstance(data, FileRange):
                    data.close()
                left.append((topic, item.partition))
                continue  # over the request's budget: only the first batch may exceed it
            if isinstance(data, FileRange) or (where is _Records.HELD and data):
                held[topic_slot, partition_slot] = data
            else:
                result.records = data
            size_bytes += data_bytes
            topic_bytes[topic_slot] += data_bytes
    return _Pass(response, topic_bytes, answer_by_ms, marks, left)


def _result(
    topic_result: broker_pb2.FetchTopicResult, item: broker_pb2.FetchPartition
) -> broker_pb2.FetchPartitionResult:
    """The answer's entry for `item`, marks unknown until read."""
    return topic_result.partitions.add(
        partition=item.partition, high_watermark=-1, last_stable_offset=-1
    )


def _served(
    manager: ReplicaManager,
    request: broker_pb2.FetchRequest,
    topic: str,
    item: broker_pb2.FetchPartition,
    now_ms: int,
) -> Partition:
    """The replica that serves `item` (the leader, or any in-sync one for a consumer that
    names its rack), in the leader epoch the fetcher names; LogError otherwise."""
    any_replica = request.replica_id == CONSUMER_REPLICA_ID and request.HasField("rack_id")
    find = manager.replica if any_replica else manager.leader
    partition = find(topic, item.partition, now_ms)
    epoch_error = partition.epoch_error(item.current_leader_epoch)
    if epoch_error is not None:
        raise epoch_error
    return partition


def _caught_up(
    partition: Partition,
    request: broker_pb2.FetchRequest,
    item: broker_pb2.FetchPartition,
    now_ms: int,
) -> bool:
    """Whether a follower's fetch of this partition is a caught-up poll of an idle one
    (`Partition.caught_up_poll`, which notes it): nothing new for the answer, which leaves it
    out, as Kafka's incremental fetch answers do (KIP-227)."""
    return partition.caught_up_poll(
        request.replica_id,
        item.fetch_offset,
        item.last_fetched_epoch,
        now_ms,
        request.replica_epoch,
        log_start_offset=item.log_start_offset,
    )


def _read_one(
    manager: ReplicaManager,
    request: broker_pb2.FetchRequest,
    partition: Partition,
    item: broker_pb2.FetchPartition,
    result: broker_pb2.FetchPartitionResult,
    now_ms: int,
    marks: list[tuple[Partition, int]],
    where: _Records,
) -> tuple[Records, int | None]:
    """The records of `partition` (`_served`), and when to answer for it (None: when records
    or the wait's end answer): now if it names a preferred read replica, when news is due to a
    follower (see Partition.high_watermark_for); the mark a follower is sent goes into
    `marks`."""
    consumer = request.replica_id == CONSUMER_REPLICA_ID
    any_replica = consumer and request.HasField("rack_id")
    # Set before reading: a follower answered OFFSET_OUT_OF_RANGE restarts at the log start.
    log_start_offset = result.log_start_offset = partition.log_start_offset
    result.high_watermark = result.last_stable_offset = partition.high_watermark
    if not consumer and item.fetch_offset < log_start_offset:
        raise LogError(
            common_pb2.OFFSET_OUT_OF_RANGE,
            f"offset {item.fetch_offset} is below the log start {log_start_offset}",
        )
    if not partition.is_leader and not partition.in_sync:
        raise LeaderError(
            common_pb2.NOT_LEADER_OR_FOLLOWER,
            f"this follower of {partition.topic}-{partition.partition} is out of its ISR: "
            "read from the leader",
            partition.leader_id,
            partition.leader_epoch,
        )
    if _diverged(partition, item, result):
        return b"", None
    if any_replica and partition.is_leader:
        preferred = manager.preferred_read_replica(
            partition, request.rack_id, item.fetch_offset, now_ms
        )
        if preferred is not None:
            result.preferred_read_replica = preferred
            return b"", now_ms
    read = _read(partition, item, consumer=consumer, zero_copy=where is _Records.RANGES)
    if latency_trace.TRACE is not None:
        _trace(latency_trace.TRACE, request, partition, item.fetch_offset, read)
    result.log_start_offset = read.log_start_offset
    high_watermark, due_ms = read.high_watermark, None
    # Only an offset the leader holds tells it what the follower has (the read checked it);
    # the mark this fetch moves goes out with its answer.
    if not consumer:
        partition.on_follower_fetch(
            request.replica_id,
            item.fetch_offset,
            now_ms,
            request.replica_epoch,
            log_start_offset=item.log_start_offset,
        )
        high_watermark, due_ms = partition.high_watermark_for(request.replica_id)
        marks.append((partition, high_watermark))
    result.high_watermark = result.last_stable_offset = high_watermark
    return b"" if read.data is None else read.data, due_ms


def _trace(
    trace: latency_trace.LatencyTrace,
    request: broker_pb2.FetchRequest,
    partition: Partition,
    fetch_offset: int,
    read: ReadResult | RangeRead,
) -> None:
    """Notes a follower's fetch offset (it holds every record below), and the end of the
    records a fetch is answered with."""
    topic, partition_id, replica = partition.topic, partition.partition, request.replica_id
    if replica != CONSUMER_REPLICA_ID:
        trace.note(
            latency_trace.Step.FOLLOWER_FETCH, topic, partition_id, fetch_offset, replica=replica
        )
    if read.next_offset > fetch_offset:
        event = latency_trace.Step.CONSUMER_READ
        if replica != CONSUMER_REPLICA_ID:
            event = latency_trace.Step.FOLLOWER_READ
        trace.note(event, topic, partition_id, read.next_offset, replica=replica)


def _diverged(
    partition: Partition, item: broker_pb2.FetchPartition, result: broker_pb2.FetchPartitionResult
) -> bool:
    """Sets `result.diverging_epoch` (and says so) when the fetcher's last fetched epoch parts
    from this log before the fetch offset. A follower judges only up to its high-water mark,
    where its log is the leader's: above it, it may still hold a deposed leader's records,
    and a consumer there (it read up to the leader's mark) is merely early: it waits."""
    if not partition.is_leader and item.fetch_offset > partition.high_watermark:
        return False
    diverging = partition.diverging_epoch(item.last_fetched_epoch, item.fetch_offset)
    if diverging is None:
        return False
    result.diverging_epoch.epoch, result.diverging_epoch.end_offset = diverging
    return True


def _read(
    partition: Partition, item: broker_pb2.FetchPartition, *, consumer: bool, zero_copy: bool
) -> ReadResult | RangeRead:
    """Consumers read up to the high-water mark this replica knows, followers to the log end."""
    bytes_max = max(item.partition_max_bytes, 0)
    if consumer and zero_copy:
        return partition.read_committed_range(item.fetch_offset, bytes_max=bytes_max)
    if consumer:
        return partition.read_committed(item.fetch_offset, bytes_max=bytes_max)
    return partition.read(item.fetch_offset, bytes_max=bytes_max)
