"""Issue 18 §3.2: a broker in the ISR of many partitions is fenced in bounded steps, one entry
each, the registration change last (Kafka's order), and the result equals the fence decided in
one go. Before the steps, the fence of 20,000 partitions was one decision whose records did not
fit one Raft entry: it was refused, and the broker was never fenced."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from pykraft.metadata_log.image import MetadataImage
from pykraft.metadata_log.records import BrokerRegistrationChangeRecord, Record
from pykraft.proto import common_pb2
from pykraft.quorum.batch import QuorumBatch
from pykraft.quorum.controller import HeartbeatTracker, start_fences
from pykraft.quorum.controller.result import ControllerResult
from pykraft.quorum.controller_core import ControllerCore
from pykraft.quorum.events import Append, DecideContext, Tick, WriteRequest

from .controller.conftest import brokers, image_with, topic
from .test_controller_core import _active, _commit

PARTITIONS = 20_000
PER_TOPIC = 1000
SESSION_TIMEOUT_MS = 9000


def _write(core: ControllerCore, records: list[Record], now_ms: int, touch: bool = False) -> None:
    def decide(ctx: DecideContext) -> ControllerResult[common_pb2.ResponseHeader]:
        if touch:
            for broker_id in (2, 3):
                ctx.heartbeats.touch(broker_id, ctx.now_ms)
        return ControllerResult(tuple(records), common_pb2.ResponseHeader())

    out = core.step(WriteRequest(0, common_pb2.ResponseHeader, now_ms + 1000, decide), now_ms)
    for append in out.appends:
        _commit(core, append, now_ms)


def _cluster(**settings: Any) -> ControllerCore:
    """An active controller with brokers 1-3 and 20,000 partitions of RF 3 (every broker in
    every ISR, broker 1 leading a third), whose brokers 2 and 3 heartbeat and 1 is silent."""
    core = _active(**settings)
    _write(core, brokers(1, 2, 3), 0)
    for t in range(PARTITIONS // PER_TOPIC):
        rotations = [(1, 2, 3), (2, 3, 1), (3, 1, 2)]
        partitions = [rotations[p % 3] for p in range(PER_TOPIC)]
        _write(core, topic(f"t{t:02}", UUID(int=100 + t), partitions), 0)
    _write(core, [], SESSION_TIMEOUT_MS - 1, touch=True)
    return core


def _fence_by_ticks(core: ControllerCore, now_ms: int) -> list[QuorumBatch]:
    """Ticks the core, committing each entry it appends, until it appends nothing more."""
    batches: list[QuorumBatch] = []
    pending: list[Append] = core.step(Tick(), now_ms).appends
    while pending:
        append = pending.pop(0)
        batches.append(append.batch)
        pending += _commit(core, append, now_ms).appends
        pending += core.step(Tick(), now_ms).appends
    return batches


def _fenced_in_one_go(image: MetadataImage) -> MetadataImage:
    tracker = HeartbeatTracker(SESSION_TIMEOUT_MS, partition_changes_max=10 * PARTITIONS)
    records, fenced = start_fences(image, [1], tracker, image.offset + 1)
    assert fenced
    return image_with(*records, base=image)


def _same_but_offsets(a: MetadataImage, b: MetadataImage) -> bool:
    return (a.cluster, a.topics, a.configs) == (b.cluster, b.topics, b.configs)


def test_a_fence_too_large_for_one_entry_is_written_in_steps() -> None:
    """Fails before the steps: the one decision of 20,000 changes exceeded the entry size and
    was refused, so broker 1 stayed unfenced and leader."""
    core = _cluster(raft_entry_bytes_max=256 * 1024)
    before = core.state.image
    batches = _fence_by_ticks(core, SESSION_TIMEOUT_MS + 1)
    registration = core.state.image.cluster.broker(1)
    assert registration is not None and registration.fenced
    assert len(batches) > 1
    assert _same_but_offsets(core.state.image, _fenced_in_one_go(before))


def test_steps_are_bounded_and_the_registration_change_comes_last() -> None:
    core = _cluster(partition_changes_per_step_max=700)
    before = core.state.image
    batches = _fence_by_ticks(core, SESSION_TIMEOUT_MS + 1)
    assert len(batches) == -(-(PARTITIONS) // 700)  # every partition has broker 1 in its ISR
    assert all(len(batch.records) <= 700 + 1 for batch in batches)
    fences = [
        (i, record)
        for i, batch in enumerate(batches)
        for record in batch.records
        if isinstance(record, BrokerRegistrationChangeRecord)
    ]
    assert [i for i, _ in fences] == [len(batches) - 1]
    assert batches[-1].records[-1] == fences[0][1] and fences[0][1].fenced
    after = core.state.image
    assert not after.topics.partitions_in_isr(1) and not after.topics.leaderless_partitions(1)
    assert _same_but_offsets(after, _fenced_in_one_go(before))


def test_a_new_active_controller_carries_on_a_fence_from_the_image() -> None:
    """The fence's progress is the image: a controller that took over half way fences the
    broker again when its session ends and only the partitions left are changed."""
    core = _cluster(partition_changes_per_step_max=1000)
    before = core.state.image
    first = core.step(Tick(), SESSION_TIMEOUT_MS + 1).appends
    assert len(first) == 1
    _commit(core, first[0], SESSION_TIMEOUT_MS + 1)
    half = core.state.image
    assert half.topics.partitions_in_isr(1).count() == PARTITIONS - 1000
    tracker = HeartbeatTracker(SESSION_TIMEOUT_MS, partition_changes_max=10 * PARTITIONS)
    tracker.reset(half, now_ms=0)  # a new controller knows nothing of the fence
    records, fenced = start_fences(half, [1], tracker, half.offset + 1)
    assert fenced and len(records) == PARTITIONS - 1000 + 1
    assert _same_but_offsets(image_with(*records, base=half), _fenced_in_one_go(before))
