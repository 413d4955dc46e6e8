from __future__ import annotations

from uuid import UUID

import pytest

from pykraft.metadata_log.image import MetadataImage, PartitionRegistration
from pykraft.metadata_log.records import (
    BrokerRegistrationChangeRecord,
    Endpoint,
    PartitionChangeRecord,
    RegisterBrokerRecord,
)
from pykraft.proto import common_pb2, controller_pb2
from pykraft.quorum.controller import (
    HeartbeatTracker,
    fence_expired_brokers,
    heartbeat,
    register_broker,
)
from tests.unit.quorum.controller.conftest import (
    CLUSTER_ID,
    after,
    broker,
    broker_epoch,
    brokers,
    image_with,
    incarnation,
    topic,
)

T = UUID(int=1)


def registration(broker_id: int, generation: int = 0) -> controller_pb2.BrokerRegistrationRequest:
    return controller_pb2.BrokerRegistrationRequest(
        broker_id=broker_id,
        cluster_id=CLUSTER_ID,
        incarnation_id=str(incarnation(broker_id, generation)),
        listeners=[controller_pb2.Listener(name="PLAINTEXT", host="h", port=9092)],
        rack="r1",
    )


def register(
    image: MetadataImage,
    request: controller_pb2.BrokerRegistrationRequest,
    *,
    session_alive: bool = False,
) -> tuple[controller_pb2.BrokerRegistrationResponse, MetadataImage, int]:
    result = register_broker(
        image,
        request,
        cluster_id=CLUSTER_ID,
        next_offset=image.offset + 1,
        session_alive=session_alive,
    )
    return result.response, after(image, result), len(result.records)


def test_new_broker_registers_fenced_with_the_offset_of_its_record_as_epoch() -> None:
    image = image_with(*brokers(1))
    result = register_broker(
        image, registration(2), cluster_id=CLUSTER_ID, next_offset=41, session_alive=False
    )
    assert result.response.broker_epoch == 41
    assert result.records == (
        RegisterBrokerRecord(
            2, incarnation(2), 41, (Endpoint("PLAINTEXT", "h", 9092, "PLAINTEXT"),), rack="r1"
        ),
    )
    registered = after(image, result).cluster.broker(2)
    assert registered is not None and registered.fenced and registered.broker_epoch == 41


def test_registering_again_with_the_same_incarnation_is_idempotent() -> None:
    image = image_with(*brokers(1))
    response, _, records = register(image, registration(1), session_alive=True)
    assert (response.header.error_code, response.broker_epoch, records) == (0, broker_epoch(1), 0)


def test_new_incarnation_is_refused_while_the_old_one_is_alive_and_unfenced() -> None:
    image = image_with(*brokers(1))
    response, _, records = register(image, registration(1, generation=1), session_alive=True)
    assert response.header.error_code == common_pb2.DUPLICATE_BROKER_REGISTRATION
    assert records == 0


def test_new_incarnation_replaces_a_dead_one_and_takes_it_out_of_isrs() -> None:
    image = image_with(*brokers(1, 2), *topic("t", T, [(1, 2)]))
    response, replaced, _ = register(image, registration(1, generation=1), session_alive=False)
    assert response.header.error_code == common_pb2.NONE
    assert response.broker_epoch == image.offset + 1
    new = replaced.cluster.broker(1)
    assert new is not None and new.incarnation_id == incarnation(1, 1) and new.fenced
    assert replaced.topics.by_id[T].partitions[0] == PartitionRegistration((1, 2), (2,), 2, 1, 1)


def test_new_incarnation_of_a_fenced_broker_registers_even_if_its_session_is_alive() -> None:
    image = image_with(broker(1, fenced=True))
    response, _, records = register(image, registration(1, generation=1), session_alive=True)
    assert response.header.error_code == common_pb2.NONE and records == 1


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"cluster_id": "other"}, common_pb2.INCONSISTENT_CLUSTER_ID),
        ({"incarnation_id": "not-a-uuid"}, common_pb2.INVALID_REQUEST),
        ({"broker_id": -1}, common_pb2.INVALID_REQUEST),
    ],
)
def test_bad_registration_is_refused(fields: dict[str, object], code: int) -> None:
    request = registration(1)
    for name, value in fields.items():
        setattr(request, name, value)
    response, _, records = register(MetadataImage.EMPTY, request)
    assert response.header.error_code == code and records == 0


def test_registration_without_listener_is_refused() -> None:
    request = registration(1)
    del request.listeners[:]
    response, _, records = register(MetadataImage.EMPTY, request)
    assert response.header.error_code == common_pb2.INVALID_REQUEST and records == 0


def beat(
    image: MetadataImage,
    broker_id: int,
    *,
    offset: int = 10_000,
    epoch: int | None = None,
    want_fence: bool = False,
    want_shut_down: bool = False,
    sessions: HeartbeatTracker | None = None,
) -> tuple[controller_pb2.BrokerHeartbeatResponse, MetadataImage, int]:
    """One heartbeat of `broker_id` at `offset`, decided against `sessions` (a fresh tracker
    where every broker of `image` is alive but has reported no metadata offset, by default)."""
    request = controller_pb2.BrokerHeartbeatRequest(
        broker_id=broker_id,
        broker_epoch=broker_epoch(broker_id) if epoch is None else epoch,
        current_metadata_offset=offset,
        want_fence=want_fence,
        want_shut_down=want_shut_down,
    )
    if sessions is None:
        sessions = HeartbeatTracker(session_timeout_ms=1000)
        sessions.reset(image, now_ms=0)
    result = heartbeat(image, request, sessions, now_ms=0, next_offset=image.offset + 1)
    return result.response, after(image, result), len(result.records)


# A fence takes the broker out of every ISR with a leader, so a fenced broker is in none.
FENCED = image_with(
    broker(1, fenced=True),
    *brokers(2),
    *topic("t", T, [PartitionRegistration((2, 1), (2,), 2, 0, 0)]),
)


def test_heartbeat_from_unknown_broker_or_stale_epoch_fails() -> None:
    unknown, _, records = beat(FENCED, 9)
    assert unknown.header.error_code == common_pb2.BROKER_ID_NOT_REGISTERED and records == 0
    stale, _, records = beat(FENCED, 1, epoch=broker_epoch(1) - 1)
    assert stale.header.error_code == common_pb2.STALE_BROKER_EPOCH and records == 0


def test_fenced_broker_stays_fenced_until_it_has_replayed_its_registration() -> None:
    behind, _, records = beat(FENCED, 1, offset=broker_epoch(1) - 1)
    assert (behind.is_caught_up, behind.is_fenced, records) == (False, True, 0)

    caught_up, image, _ = beat(FENCED, 1, offset=broker_epoch(1))
    assert (caught_up.is_caught_up, caught_up.is_fenced, caught_up.should_shut_down) == (
        True,
        False,
        False,
    )
    registered = image.cluster.broker(1)
    assert registered is not None and not registered.fenced


def test_fenced_broker_asking_to_stay_fenced_or_to_shut_down() -> None:
    stay, _, records = beat(FENCED, 1, want_fence=True)
    assert (stay.is_fenced, stay.should_shut_down, records) == (True, False, 0)
    leave, _, records = beat(FENCED, 1, want_shut_down=True)
    assert (leave.is_fenced, leave.should_shut_down, records) == (True, True, 0)


def test_unfenced_broker_asking_to_be_fenced_is_fenced_and_leaves_isrs() -> None:
    image = image_with(*brokers(1, 2), *topic("t", T, [(2, 1), (1, 2)]))
    response, fenced, _ = beat(image, 2, want_fence=True)
    assert response.is_fenced and not response.should_shut_down
    registered = fenced.cluster.broker(2)
    assert registered is not None and registered.fenced
    partitions = fenced.topics.by_id[T].partitions
    assert [(p.leader, p.isr) for p in partitions.values()] == [(1, (1,)), (1, (1,))]


def test_controlled_shutdown_moves_leadership_then_lets_the_broker_go() -> None:
    image = image_with(*brokers(1, 2), *topic("t", T, [(1, 2), (2, 1)]))
    sessions = HeartbeatTracker(session_timeout_ms=1000)
    sessions.reset(image, now_ms=0)

    first, shutting, records = beat(image, 1, want_shut_down=True, sessions=sessions)
    assert (first.is_fenced, first.should_shut_down) == (False, False) and records > 0
    registered = shutting.cluster.broker(1)
    assert registered is not None and registered.in_controlled_shutdown
    assert {p.leader for p in shutting.topics.by_id[T].partitions.values()} == {2}

    beat(shutting, 2, offset=shutting.offset, sessions=sessions)
    second, gone, _ = beat(
        shutting, 1, offset=shutting.offset, want_shut_down=True, sessions=sessions
    )
    assert (second.is_fenced, second.should_shut_down) == (True, True)
    registered = gone.cluster.broker(1)
    assert registered is not None and registered.fenced


def test_controlled_shutdown_waits_until_every_live_broker_has_the_leader_changes() -> None:
    """Kafka lets a broker go only once every live broker's metadata has reached the records
    that moved its leaderships: until then the old leader may not know it lost them, and a
    broker that has not seen them may still send to it (issue 12 §2.3)."""
    image = image_with(*brokers(1, 2, 3), *topic("t", T, [(1, 2, 3)]))
    sessions = HeartbeatTracker(session_timeout_ms=1000)
    sessions.reset(image, now_ms=0)
    _, shutting, records = beat(
        image, 1, offset=image.offset, want_shut_down=True, sessions=sessions
    )
    assert records > 0 and shutting.topics.by_id[T].partitions[0].leader != 1
    moved_at = shutting.offset

    beat(shutting, 2, offset=moved_at, sessions=sessions)
    beat(shutting, 3, offset=moved_at - 1, sessions=sessions)  # broker 3 is behind
    waiting, _, records = beat(shutting, 1, offset=moved_at, want_shut_down=True, sessions=sessions)
    assert (waiting.is_fenced, waiting.should_shut_down, records) == (False, False, 0)
    beat(shutting, 3, offset=moved_at, sessions=sessions)
    done, _, _ = beat(shutting, 1, offset=moved_at, want_shut_down=True, sessions=sessions)
    assert (done.is_fenced, done.should_shut_down) == (True, True)


def test_controlled_shutdown_waits_for_the_shutting_broker_itself_too() -> None:
    image = image_with(*brokers(1, 2), *topic("t", T, [(1, 2)]))
    sessions = HeartbeatTracker(session_timeout_ms=1000)
    sessions.reset(image, now_ms=0)
    _, shutting, _ = beat(image, 1, offset=image.offset, want_shut_down=True, sessions=sessions)
    beat(shutting, 2, offset=shutting.offset, sessions=sessions)
    behind, _, _ = beat(
        shutting, 1, offset=shutting.offset - 1, want_shut_down=True, sessions=sessions
    )
    assert not behind.should_shut_down


def test_a_new_active_controller_waits_for_the_offset_it_took_over_at() -> None:
    """Its sessions know nothing of earlier shutdown offsets: a broker already in controlled
    shutdown waits until every live broker has the whole image the controller started from."""
    image = image_with(*brokers(1, 2), *topic("t", T, [(2, 1)]))
    image = image_with(
        BrokerRegistrationChangeRecord(1, broker_epoch(1), in_controlled_shutdown=True), base=image
    )
    sessions = HeartbeatTracker(session_timeout_ms=1000)
    sessions.reset(image, now_ms=0)
    beat(image, 2, offset=image.offset - 1, sessions=sessions)
    waiting, _, _ = beat(image, 1, offset=image.offset, want_shut_down=True, sessions=sessions)
    assert not waiting.should_shut_down
    beat(image, 2, offset=image.offset, sessions=sessions)
    done, _, _ = beat(image, 1, offset=image.offset, want_shut_down=True, sessions=sessions)
    assert done.should_shut_down


def test_offline_replicas_leave_their_isr_and_leadership() -> None:
    """A broker whose log directory failed names the replicas it cannot serve; the controller
    takes it out of their ISRs and elects other leaders, and leaves its other partitions
    alone (issue 12 §2.7)."""
    image = image_with(*brokers(1, 2, 3), *topic("t", T, [(1, 2, 3), (2, 1, 3), (1, 3, 2)]))
    request = controller_pb2.BrokerHeartbeatRequest(
        broker_id=1,
        broker_epoch=broker_epoch(1),
        current_metadata_offset=image.offset,
        offline_replicas=[controller_pb2.OfflineReplicas(topic_id=str(T), partitions=[0, 1, 7])],
    )
    sessions = HeartbeatTracker(session_timeout_ms=1000)
    result = heartbeat(image, request, sessions, now_ms=0, next_offset=image.offset + 1)
    assert not result.response.is_fenced
    partitions = after(image, result).topics.by_id[T].partitions
    assert [(p.leader, p.isr) for p in partitions.values()] == [
        (2, (2, 3)),
        (2, (2, 3)),
        (1, (1, 3, 2)),
    ]
    moved = after(image, result)
    again = heartbeat(moved, request, sessions, now_ms=1, next_offset=moved.offset + 1)
    assert again.records == ()  # nothing left to move: steady heartbeats write nothing


def test_broker_leading_nothing_shuts_down_at_once_and_is_fenced() -> None:
    image = image_with(*brokers(1, 2), *topic("t", T, [(2, 1)]))
    response, gone, records = beat(image, 1, want_shut_down=True)
    assert (response.is_fenced, response.should_shut_down) == (True, True)
    assert gone.topics.by_id[T].partitions[0].isr == (2,)
    assert records == 2


def test_unfence_elects_the_broker_where_it_is_the_only_isr_member() -> None:
    image = image_with(*brokers(1, 2), *topic("t", T, [(1, 2)]))
    image = image_with(PartitionChangeRecord(T, 0, isr=(1,)), base=image)
    _, fenced, _ = beat(image, 1, want_fence=True)
    assert fenced.topics.by_id[T].partitions[0].leader == -1
    response, back, _ = beat(fenced, 1)
    assert not response.is_fenced
    assert back.topics.by_id[T].partitions[0].leader == 1


def test_tracker_sessions_expire_after_the_timeout_and_reset_on_activation() -> None:
    image = image_with(*brokers(1, 2), broker(3, fenced=True))
    tracker = HeartbeatTracker(session_timeout_ms=1000)
    tracker.reset(image, now_ms=0)
    tracker.touch(1, now_ms=900)
    assert tracker.is_alive(2, 1000) and not tracker.is_alive(2, 1001)
    assert tracker.expired(image, now_ms=1500) == [2]  # 3 is fenced, so never expires
    tracker.touch(1, now_ms=500)  # late, out-of-order contact does not move time back
    assert tracker.is_alive(1, 1900)
    tracker.remove(1)
    assert not tracker.is_alive(1, 1000)
    assert tracker.expired(image, now_ms=1000) == [1]
    tracker.reset(image, now_ms=5000)
    assert tracker.expired(image, now_ms=5500) == []


def test_fence_record_carries_the_registration_epoch() -> None:
    sessions = HeartbeatTracker(session_timeout_ms=1000)
    result = heartbeat(
        FENCED,
        controller_pb2.BrokerHeartbeatRequest(
            broker_id=2, broker_epoch=broker_epoch(2), want_fence=True
        ),
        sessions,
        now_ms=0,
        next_offset=FENCED.offset + 1,
    )
    assert result.records[-1] == BrokerRegistrationChangeRecord(2, broker_epoch(2), fenced=True)


THREE_LED_BY_1 = image_with(*brokers(1, 2), *topic("t", T, [(1, 2), (1, 2), (1, 2)]))


def one_partition_per_step(image: MetadataImage) -> HeartbeatTracker:
    sessions = HeartbeatTracker(session_timeout_ms=1000, partition_changes_max=1)
    sessions.reset(image, now_ms=0)
    return sessions


def steps_until_done(image: MetadataImage, sessions: HeartbeatTracker) -> tuple[MetadataImage, int]:
    """The core's turns: a step each while anything is leaving; the image after, and the count."""
    steps = 0
    while sessions.leaving_in_progress:
        image = after(image, fence_expired_brokers(image, [], sessions, image.offset + 1))
        steps += 1
    return image, steps


def test_a_broker_being_fenced_is_answered_unfenced_and_changes_nothing_until_its_fence_ends() -> (
    None
):
    sessions = one_partition_per_step(THREE_LED_BY_1)
    asked, fencing, records = beat(THREE_LED_BY_1, 1, want_fence=True, sessions=sessions)
    assert (asked.is_fenced, records) == (False, 1), "fenced only once its last step commits"
    again, same, records = beat(fencing, 1, sessions=sessions)
    assert (again.is_fenced, records) == (False, 0) and same.topics == fencing.topics
    fenced, steps = steps_until_done(fencing, sessions)
    assert steps == 2
    registration = fenced.cluster.broker(1)
    assert registration is not None and registration.fenced
    assert {(p.leader, p.isr) for p in fenced.topics.by_id[T].partitions.values()} == {(2, (2,))}
    last, _, records = beat(fenced, 1, sessions=sessions, offset=broker_epoch(1) - 1)
    assert (last.is_fenced, records) == (True, 0)


def test_a_replaced_incarnation_leaves_every_isr_before_the_new_one_is_unfenced() -> None:
    """Registration takes the old incarnation out of one step's partitions; a fenced broker still
    in an ISR (the rest, also after a controller failover) leaves it before it may be unfenced,
    since a restarted broker may have lost what it had not flushed."""
    sessions = one_partition_per_step(THREE_LED_BY_1)
    result = register_broker(
        THREE_LED_BY_1,
        registration(1, generation=1),
        cluster_id=CLUSTER_ID,
        next_offset=THREE_LED_BY_1.offset + 1,
        session_alive=False,
        partitions_max=1,
    )
    registered = after(THREE_LED_BY_1, result)
    assert registered.topics.partitions_in_isr(1).count() == 2
    epoch = result.response.broker_epoch
    held, leaving, records = beat(registered, 1, epoch=epoch, sessions=sessions)
    assert (held.is_caught_up, held.is_fenced, records) == (True, True, 1)
    left, steps = steps_until_done(leaving, sessions)
    assert steps == 1 and not left.topics.partitions_in_isr(1)
    unfenced, back, _ = beat(left, 1, epoch=epoch, sessions=sessions)
    assert not unfenced.is_fenced
    assert {p.leader for p in back.topics.by_id[T].partitions.values()} == {2}


def test_controlled_shutdown_moves_leaderships_a_step_per_turn() -> None:
    sessions = one_partition_per_step(THREE_LED_BY_1)
    first, moving, records = beat(THREE_LED_BY_1, 1, want_shut_down=True, sessions=sessions)
    assert (first.is_fenced, first.should_shut_down, records) == (False, False, 2)  # mark, step
    waiting, _, records = beat(moving, 1, want_shut_down=True, sessions=sessions)
    assert (waiting.should_shut_down, records) == (False, 0)
    moved, steps = steps_until_done(moving, sessions)
    assert steps == 2 and not moved.topics.partitions_in_isr(1)
    beat(moved, 2, offset=moved.offset, sessions=sessions)
    done, _, _ = beat(moved, 1, offset=moved.offset, want_shut_down=True, sessions=sessions)
    assert (done.is_fenced, done.should_shut_down) == (True, True)
