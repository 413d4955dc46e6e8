"""Produce on the leader: acks 0 and 1 answer once the leader's log has the batches; acks=all
(-1) waits, up to the request's timeout, until the high-water mark covers them (every in-sync
replica has them), else REQUEST_TIMED_OUT. Other acks values: INVALID_REQUIRED_ACKS. Clients
may not write the internal `__consumer_offsets`: INVALID_TOPIC_EXCEPTION, as Kafka.

An acks=all append counts only while this broker still leads the partition in the epoch it was
written in: once leadership moves (or the partition or broker goes away) the wait ends with
NOT_LEADER_OR_FOLLOWER, as the new leader may have truncated those records.

An idempotent producer's retry of batches the log already holds writes nothing and is answered
with the original batches' offsets (the log's `AppendInfo.duplicate`); with acks=all it waits
for the original batches' end offset, as they may not be replicated yet."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from pykraft.broker import latency_trace
from pykraft.broker.counters import BYTES_IN_TOTAL, MESSAGES_IN_TOTAL
from pykraft.broker.group.config import OFFSETS_TOPIC
from pykraft.broker.log import LogError
from pykraft.broker.partition import AckState, Partition
from pykraft.broker.partition_watches import COMMITTED
from pykraft.broker.replica_lookup import LeaderError
from pykraft.broker.replica_manager import VALID_ACKS, ReplicaManager
from pykraft.proto import broker_pb2, common_pb2
from pykraft.server_common.errors import fill_error


class PartitionRecords(NamedTuple):
    """One partition's record batches in a produce request, as the client sent them."""

    topic: str
    partition: int
    records: bytes


class _Now(NamedTuple):
    """The time of one partition's append: monotonic for the session, wall for the log."""

    monotonic_ms: int
    wall_ms: int


@dataclass(eq=False)
class _Appended:
    """One partition's append, which with acks=all waits for the high-water mark to reach
    `end_offset`."""

    partition: Partition
    leader_epoch: int
    result: broker_pb2.ProducePartitionResult
    end_offset: int

    def state(self) -> AckState:
        return self.partition.ack_state(self.leader_epoch, self.end_offset)


def handle_produce(
    manager: ReplicaManager,
    request: broker_pb2.ProduceRequest,
    clock_ms: Callable[[], int],
    *,
    wall_clock_ms: Callable[[], int],
) -> broker_pb2.ProduceResponse:
    """The gRPC Produce: `append_request`, then `await_acks`."""
    appends = append_request(manager, request, clock_ms, wall_clock_ms=wall_clock_ms)
    await_acks(manager, appends, clock_ms)
    return appends.response()


@dataclass(eq=False)
class Appends:
    """A produce request's appends, done: each partition's result, in the request's order
    (final unless acks=all must still wait for the high-water mark, `await_acks`)."""

    request: broker_pb2.ProduceRequest
    results: list[broker_pb2.ProducePartitionResult]
    appended: list[_Appended]

    @property
    def waits(self) -> bool:
        """Whether `await_acks` may still change the results (acks=all, something appended)."""
        return _waits(self.request.acks, self.appended)

    def response(self) -> broker_pb2.ProduceResponse:
        """The results as a response shaped as the request (copies: call it once, last)."""
        ordered = iter(self.results)
        response = broker_pb2.ProduceResponse()
        for topic in self.request.topics:
            response.topics.add(
                topic=topic.topic, partitions=[next(ordered) for _ in topic.partitions]
            )
        return response


def append_request(
    manager: ReplicaManager,
    request: broker_pb2.ProduceRequest,
    clock_ms: Callable[[], int],
    *,
    wall_clock_ms: Callable[[], int],
) -> Appends:
    """`append_records` of each partition of the request, in its order."""
    results, appended = append_records(
        manager,
        (
            PartitionRecords(topic.topic, item.partition, item.records)
            for topic in request.topics
            for item in topic.partitions
        ),
        acks=request.acks,
        clock_ms=clock_ms,
        wall_clock_ms=wall_clock_ms,
    )
    return Appends(request, results, appended)


def await_acks(manager: ReplicaManager, appends: Appends, clock_ms: Callable[[], int]) -> None:
    """With acks=all, waits until the high-water mark covers each append or the request's
    timeout passes (from now), and marks the results; returns at once when nothing waits
    (`Appends.waits`). Traces the request's way out either way."""
    request = appends.request
    _settle(manager, appends.appended, request.acks, request.timeout_ms, clock_ms)


def _waits(acks: int, appended: list[_Appended]) -> bool:
    return acks == -1 and bool(appended)


def _settle(
    manager: ReplicaManager,
    appended: list[_Appended],
    acks: int,
    timeout_ms: int,
    clock_ms: Callable[[], int],
) -> None:
    """The acks=all wait (when `_waits`), then the trace of the answer's way out."""
    if _waits(acks, appended):
        _await_high_watermark(manager, appended, clock_ms() + timeout_ms, clock_ms)
    trace = latency_trace.TRACE
    if trace is not None:
        _trace(trace, latency_trace.Step.PRODUCE_OUT, appended, time.perf_counter_ns())


def produce_records(
    manager: ReplicaManager,
    partitions: Iterable[PartitionRecords],
    *,
    acks: int,
    timeout_ms: int,
    clock_ms: Callable[[], int],
    wall_clock_ms: Callable[[], int],
) -> list[broker_pb2.ProducePartitionResult]:
    """`append_records`, then with acks=all the wait for the high-water mark (as `await_acks`):
    one result per partition, in order."""
    results, appended = append_records(
        manager, partitions, acks=acks, clock_ms=clock_ms, wall_clock_ms=wall_clock_ms
    )
    _settle(manager, appended, acks, timeout_ms, clock_ms)
    return results


def append_records(
    manager: ReplicaManager,
    partitions: Iterable[PartitionRecords],
    *,
    acks: int,
    clock_ms: Callable[[], int],
    wall_clock_ms: Callable[[], int],
) -> tuple[list[broker_pb2.ProducePartitionResult], list[_Appended]]:
    """Appends each partition's batches as leader, in order (the records are handed to the log
    as they are: no copy here): one result per partition in the same order, and the appends
    an acks=all answer waits for. `clock_ms` (monotonic) times the broker's session;
    `wall_clock_ms` is the log's time: what LogAppendTime stamps and timestamps are checked
    against, as in Kafka."""
    arrived_ns = time.perf_counter_ns() if latency_trace.TRACE is not None else 0
    results: list[broker_pb2.ProducePartitionResult] = []
    appended: list[_Appended] = []
    for item in partitions:
        result = broker_pb2.ProducePartitionResult(
            partition=item.partition, base_offset=-1, log_append_time_ms=-1
        )
        results.append(result)
        now = _Now(clock_ms(), wall_clock_ms())
        done = _produce_one(manager, acks, item, result, now)
        if done is not None:
            appended.append(done)
    trace = latency_trace.TRACE
    if trace is not None:
        _trace(trace, latency_trace.Step.PRODUCE_IN, appended, arrived_ns)
        _trace(trace, latency_trace.Step.LEADER_APPEND, appended, time.perf_counter_ns())
    return results, appended


def _trace(
    trace: latency_trace.LatencyTrace,
    event: latency_trace.Step,
    appended: list[_Appended],
    at_ns: int,
) -> None:
    for item in appended:
        partition = item.partition
        trace.note(event, partition.topic, partition.partition, item.end_offset, at_ns=at_ns)


def _produce_one(
    manager: ReplicaManager,
    acks: int,
    item: PartitionRecords,
    result: broker_pb2.ProducePartitionResult,
    now: _Now,
) -> _Appended | None:
    try:
        if acks not in VALID_ACKS:
            raise LogError(common_pb2.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, not {acks}")
        if item.topic == OFFSETS_TOPIC:
            raise LogError(
                common_pb2.INVALID_TOPIC_EXCEPTION,
                f"{item.topic} is an internal topic: only the group coordinator writes it",
            )
        partition = manager.leader(item.topic, item.partition, now.monotonic_ms)
        info, leader_epoch = partition.append_as_leader(item.records, acks=acks, now_ms=now.wall_ms)
    except LogError as error:
        fill_error(result, error)
        if isinstance(error, LeaderError):
            result.current_leader.CopyFrom(error.current_leader)
        return None
    if not info.duplicate:
        record_count = info.last_offset - info.first_offset + 1
        manager.counters.add(BYTES_IN_TOTAL, info.size_bytes, topic=item.topic)
        manager.counters.add(MESSAGES_IN_TOTAL, record_count, topic=item.topic)
    result.base_offset = info.first_offset
    result.log_append_time_ms = info.log_append_time_ms
    result.log_start_offset = partition.log_start_offset
    return _Appended(partition, leader_epoch, result, info.last_offset + 1)


def _await_high_watermark(
    manager: ReplicaManager, pending: list[_Appended], deadline_ms: int, clock_ms: Callable[[], int]
) -> None:
    """Decides each wait once per wake-up, woken by changes of its own partitions only
    (`Partition.ack_state`, whose every input signals the partition): LOST ends it with
    NOT_LEADER_OR_FOLLOWER, DONE leaves the result as it is, WAIT waits on; REQUEST_TIMED_OUT
    for those still waiting at the deadline."""
    lost: list[_Appended] = []

    def all_decided() -> bool:
        nonlocal pending
        waiting_on: list[_Appended] = []
        for waiting in pending:
            state = waiting.state()
            if state is AckState.LOST:
                lost.append(waiting)
            elif state is AckState.WAIT:
                waiting_on.append(waiting)
        pending = waiting_on
        return not pending

    keys = {(waiting.partition.topic, waiting.partition.partition) for waiting in pending}
    manager.watches.wait_until(
        keys, all_decided, deadline_ms=deadline_ms, clock_ms=clock_ms, interest=COMMITTED
    )
    for waiting in lost:
        waiting.result.error_code = common_pb2.NOT_LEADER_OR_FOLLOWER
        waiting.result.error_message = (
            f"leadership of {waiting.partition.topic}-{waiting.partition.partition} moved "
            "before every in-sync replica had the records; retry on the new leader"
        )
    for waiting in pending:
        waiting.result.error_code = common_pb2.REQUEST_TIMED_OUT
        waiting.result.error_message = (
            f"not every in-sync replica of {waiting.partition.topic}-"
            f"{waiting.partition.partition} had the records in time"
        )
