"""Session streams: the end of a broker's current stream fences it; an older stream's end, a
stream of another incarnation and a stream opened before this controller became active do not."""

from __future__ import annotations

from uuid import UUID

from pykraft.metadata_log.image import MetadataImage
from pykraft.proto import common_pb2, controller_pb2
from pykraft.quorum.controller import HeartbeatTracker
from pykraft.quorum.controller.sessions import end_session, open_session
from tests.unit.quorum.controller.conftest import (
    after,
    broker,
    broker_epoch,
    brokers,
    image_with,
    topic,
)

T = UUID(int=1)
IMAGE = image_with(*brokers(1, 2), *topic("t", T, [(2, 1), (1, 2)]))


def session(broker_id: int, epoch: int | None = None) -> controller_pb2.BrokerSessionRequest:
    epoch = broker_epoch(broker_id) if epoch is None else epoch
    return controller_pb2.BrokerSessionRequest(broker_id=broker_id, broker_epoch=epoch)


def opened(
    tracker: HeartbeatTracker, request: controller_pb2.BrokerSessionRequest, sid: int
) -> int:
    result = open_session(IMAGE, request, tracker, sid)
    assert result.records == ()
    return result.response.header.error_code


def ended(
    tracker: HeartbeatTracker, request: controller_pb2.BrokerSessionRequest, sid: int
) -> MetadataImage:
    return after(IMAGE, end_session(IMAGE, request, tracker, sid, IMAGE.offset + 1))


def leaders(image: MetadataImage) -> list[int]:
    return [p.leader for p in image.topics.by_id[T].partitions.values()]


def fresh_tracker() -> HeartbeatTracker:
    tracker = HeartbeatTracker(session_timeout_ms=60_000)
    tracker.reset(IMAGE, now_ms=0)
    return tracker


def test_end_of_the_current_stream_fences_the_broker_and_moves_its_leaderships() -> None:
    tracker = fresh_tracker()
    assert opened(tracker, session(2), 7) == common_pb2.NONE
    image = ended(tracker, session(2), 7)
    registered = image.cluster.broker(2)
    assert registered is not None and registered.fenced
    assert leaders(image) == [1, 1]
    assert not tracker.is_alive(2, now_ms=0)  # its session ended with the stream
    assert ended(tracker, session(2), 7).offset == IMAGE.offset  # seen twice: fenced once


def test_an_older_stream_ending_after_a_newer_one_opened_fences_nothing() -> None:
    tracker = fresh_tracker()
    opened(tracker, session(2), 7)
    opened(tracker, session(2), 9)
    opened(tracker, session(2), 8)  # opened late: 9 stays current
    assert ended(tracker, session(2), 7).offset == IMAGE.offset
    assert ended(tracker, session(2), 8).offset == IMAGE.offset
    assert leaders(ended(tracker, session(2), 9)) == [1, 1]


def test_a_stream_opened_before_the_controller_became_active_fences_nothing() -> None:
    tracker = fresh_tracker()
    opened(tracker, session(2), 7)
    tracker.reset(IMAGE, now_ms=100)  # this controller became active (again)
    assert ended(tracker, session(2), 7).offset == IMAGE.offset


def test_a_stream_of_another_incarnation_is_refused_and_its_end_fences_nothing() -> None:
    tracker = fresh_tracker()
    stale = session(2, broker_epoch(2) - 1)
    assert opened(tracker, stale, 7) == common_pb2.STALE_BROKER_EPOCH
    assert opened(tracker, session(5), 8) == common_pb2.BROKER_ID_NOT_REGISTERED
    assert ended(tracker, stale, 7).offset == IMAGE.offset
    opened(tracker, session(2), 9)
    assert ended(tracker, stale, 9).offset == IMAGE.offset  # re-registered since: not this one


def test_the_end_of_a_fenced_brokers_stream_writes_nothing() -> None:
    image = image_with(broker(1), broker(2, fenced=True))
    tracker = HeartbeatTracker(session_timeout_ms=60_000)
    tracker.reset(image, now_ms=0)
    open_session(image, session(2), tracker, 3)
    assert end_session(image, session(2), tracker, 3, image.offset + 1).records == ()
