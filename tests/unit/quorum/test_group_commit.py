"""Group commit in `ControllerCore` (issue 18 §2.3, `quorum/entry_group.py`): writes decided while
an entry of the active controller is in flight share its next entry. Stepped by hand as in
`test_controller_core.py`: the test plays the Raft log, applying entries to `core.state` and
stepping their outcomes. Proves: several writes in one entry, in the order decided, each seeing
the ones before; none answered before its entry commits; a failed entry fails every write in it
and those waiting for the next; the entry's limits (writes, bytes, linger)."""

from __future__ import annotations

from google.protobuf.message import Message

from pykraft.metadata_log import replay_all
from pykraft.metadata_log.image import MetadataImage
from pykraft.metadata_log.records import ConfigRecord, ConfigResourceType, NoOpRecord, Record
from pykraft.proto import admin_pb2, common_pb2
from pykraft.quorum.batch import BatchKind, QuorumBatch
from pykraft.quorum.controller.result import ControllerResult
from pykraft.quorum.entry_group import ENTRY_RECORDS_MAX
from pykraft.quorum.events import (
    Answer,
    AppendDone,
    DecideContext,
    Output,
    RaftPolled,
    Stop,
    Tick,
    WriteRequest,
)
from pykraft.quorum.raft import AppendError
from pykraft.quorum.replies import header_of
from pykraft.quorum.roles import Role
from pykraft.quorum.state_machine import MetadataStateMachine

from .test_controller_core import _active, _commit, _create_topic, _status


def _codes(answers: list[Answer]) -> list[tuple[int, int]]:
    codes: list[tuple[int, int]] = []
    for answer in answers:
        assert isinstance(answer.response, Message)
        codes.append((answer.request_id, header_of(answer.response).error_code))
    return codes


def _config_write(request_id: int, value_bytes: int) -> WriteRequest:
    """A write of one topic config record whose value takes `value_bytes`."""
    record = ConfigRecord(ConfigResourceType.TOPIC, f"t{request_id}", "x", "v" * value_bytes)
    records: tuple[Record, ...] = (record,)
    return WriteRequest(
        request_id,
        common_pb2.ResponseHeader,
        10_000,
        lambda ctx: ControllerResult(records, common_pb2.ResponseHeader()),
    )


def test_writes_decided_while_an_entry_is_in_flight_share_the_next_and_wait_for_its_commit() -> (
    None
):
    core = _active()
    (first,) = core.step(_create_topic(10, "a"), 1).appends
    assert first.request_ids == (10,)  # nothing was in flight: it leaves at once
    for request_id, name in ((11, "b"), (12, "c"), (13, "a")):
        out = core.step(_create_topic(request_id, name), 2)
        assert out.appends == [] and out.answers == []

    out = _commit(core, first, now_ms=3)
    assert [a.request_id for a in out.answers] == [10]
    (grouped,) = out.appends  # the first committed: the three waiting leave as one entry
    assert grouped.request_ids == (11, 12, 13)
    assert grouped.payload == grouped.batch.encode()
    names = [r.name for r in QuorumBatch.decode(grouped.payload).records if hasattr(r, "name")]
    assert names == ["b", "c"]  # in the order decided; 13 saw 10's "a" and wrote nothing

    out = _commit(core, grouped, now_ms=4)
    assert _codes(out.answers) == [
        (11, common_pb2.NONE),
        (12, common_pb2.NONE),
        (13, common_pb2.NONE),
    ]
    responses = [a.response for a in out.answers]
    assert isinstance(responses[2], admin_pb2.CreateTopicsResponse)
    assert responses[2].topics[0].error_code == common_pb2.TOPIC_ALREADY_EXISTS
    assert set(core.state.image.topics.by_name) == {"a", "b", "c"}


def test_a_failed_entry_fails_every_write_in_it_and_those_waiting_for_the_next() -> None:
    core = _active()
    (first,) = core.step(_create_topic(10, "a"), 1).appends
    core.step(_create_topic(11, "b"), 2)
    (second,) = core.step(Tick(), 2 + core.config.append_linger_ms).appends  # lingered
    core.step(_create_topic(12, "c"), 30)

    out = core.step(AppendDone(second.append_id, None, AppendError.DISCARDED), 31)
    assert sorted(_codes(out.answers)) == [
        (10, common_pb2.NOT_CONTROLLER),
        (11, common_pb2.NOT_CONTROLLER),
        (12, common_pb2.NOT_CONTROLLER),
    ]
    assert out.appends == [] and core.role.role is Role.STANDBY
    assert core.step(AppendDone(first.append_id, None, AppendError.DISCARDED), 32).answers == []


def test_an_entry_waits_at_most_the_linger_while_another_is_in_flight() -> None:
    core = _active(append_linger_ms=40)
    core.step(_create_topic(10, "a"), 100)
    out = core.step(_create_topic(11, "b"), 105)
    assert out.appends == [] and out.wake_at_ms == 145
    assert core.step(Tick(), 144).appends == []
    (lingered,) = core.step(Tick(), 145).appends
    assert lingered.request_ids == (11,)


def test_an_entry_holds_at_most_entry_operations_max_writes() -> None:
    core = _active(entry_operations_max=2)
    core.step(_create_topic(10, "a"), 1)
    assert core.step(_create_topic(11, "b"), 1).appends == []
    (full,) = core.step(_create_topic(12, "c"), 1).appends
    assert full.request_ids == (11, 12)
    assert core.step(_create_topic(13, "d"), 1).appends == []


def test_an_entry_stays_under_the_raft_entry_bytes_max() -> None:
    core = _active(raft_entry_bytes_max=4000)
    core.step(_config_write(10, 100), 1)
    assert core.step(_config_write(11, 2100), 1).appends == []
    (sealed,) = core.step(_config_write(12, 2100), 1).appends  # both would not fit
    assert sealed.request_ids == (11,) and len(sealed.payload) < 4000


def test_a_write_larger_than_any_entry_is_refused_before_it_changes_anything() -> None:
    core = _active(raft_entry_bytes_max=4000)
    (first,) = core.step(_config_write(10, 100), 1).appends
    out = core.step(_config_write(11, 5000), 1)
    assert out.appends == [] and _codes(out.answers) == [(11, common_pb2.POLICY_VIOLATION)]
    # Committing the one write in flight leaves the controller idle: had 11 changed the pending
    # image, the core's check that it equals the committed one would fail here.
    out = _commit(core, first, now_ms=2)
    assert out.appends == [] and _codes(out.answers) == [(10, common_pb2.NONE)]


def test_losing_leadership_or_stopping_answers_the_writes_waiting_for_an_entry() -> None:
    for event in (RaftPolled(_status(2, 3)), Stop("stopping")):
        core = _active()
        core.step(_create_topic(10, "a"), 1)
        core.step(_create_topic(11, "b"), 2)
        out: Output = core.step(event, 3)
        assert (11, common_pb2.NOT_CONTROLLER) in _codes(out.answers)


def _many_records_write(request_id: int, count: int) -> WriteRequest:
    """A write of `count` small topic config records."""
    records: tuple[Record, ...] = tuple(
        ConfigRecord(ConfigResourceType.TOPIC, f"t{request_id}", f"k{i}", "v") for i in range(count)
    )
    return WriteRequest(
        request_id,
        common_pb2.ResponseHeader,
        10_000,
        lambda ctx: ControllerResult(records, common_pb2.ResponseHeader()),
    )


def test_an_entry_holds_at_most_entry_records_max_records() -> None:
    """Kafka's 10,000 records per batch: a follower applies an entry in one go on the thread
    that also answers Raft, so an entry of several large CreateTopics (36,000 partitions at a
    million) outlasted the election timeout on a loaded machine."""
    core = _active()
    core.step(_config_write(10, 10), 1)  # in flight: what follows gathers
    half = ENTRY_RECORDS_MAX // 2 + 1
    assert core.step(_many_records_write(11, half), 1).appends == []
    (sealed,) = core.step(_many_records_write(12, half), 1).appends  # both would not fit
    assert sealed.request_ids == (11,) and len(sealed.batch.records) == half


def _image_seen(request_id: int, seen: list[MetadataImage]) -> WriteRequest:
    """A write that records the image it was decided on and writes nothing."""

    def decide(ctx: DecideContext) -> ControllerResult[common_pb2.ResponseHeader]:
        seen.append(ctx.image)
        return ControllerResult((), common_pb2.ResponseHeader())

    return WriteRequest(request_id, common_pb2.ResponseHeader, 10_000, decide)


def test_a_committed_entry_takes_the_image_its_writes_were_decided_into() -> None:
    """The active controller replays each write onto its pending image as it decides it; the
    commit replayed the whole entry again onto the committed image (31 ms of the 9,000-partition
    CreateTopics' 120 on the thread that must heartbeat). Now the commit takes the pending
    image when the entry was decided on the committed one, equal to what a follower replays."""
    core = _active()
    (first,) = core.step(_create_topic(10, "a"), 1).appends
    for request_id, name in ((11, "b"), (12, "c")):
        core.step(_create_topic(request_id, name), 2)
    seen: list[MetadataImage] = []
    core.step(_image_seen(13, seen), 2)  # decided after a, b and c
    before = core.state.image

    (grouped,) = _commit(core, first, now_ms=3).appends
    after_first = core.state.image
    assert after_first == replay_all(before, first.batch.records).apply(
        offset=before.offset + len(first.batch.records), epoch=1
    )
    _commit(core, grouped, now_ms=4)
    assert core.state.image is seen[0]  # not replayed again
    assert core.state.image == replay_all(after_first, grouped.batch.records).apply(
        offset=after_first.offset + len(grouped.batch.records), epoch=1
    )


def test_an_entry_decided_on_another_image_is_replayed() -> None:
    """The shortcut holds only for the image the entry was decided on: a state machine that
    applied something else first (here: the same entry decided twice, as after a change of
    controller) replays the records."""
    core = _active()
    (append,) = core.step(_create_topic(10, "a"), 1).appends
    other = MetadataStateMachine(tail_records_max=100)
    other.apply(QuorumBatch(BatchKind.LEADER_CHANGE, 1, 1, (NoOpRecord(),)).encode())
    other.remember(append.payload, append.batch, replayed=(core.state.image, core.state.image))
    other.apply(append.payload)
    assert set(other.image.topics.by_name) == {"a"}
