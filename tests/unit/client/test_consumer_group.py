"""Consumer groups (KIP-848, member side) against a fake coordinator over real gRPC: joining,
incremental reconciliation and the rebalance listener, fencing, the poll timer, leaving."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from pykraft.client import Consumer, ConsumerRecord, TopicPartition
from pykraft.client.consumer.consumer import IllegalStateError
from pykraft.client.consumer.listener import ConsumerRebalanceListener
from pykraft.client.errors import (
    InvalidGroupIdError,
    InvalidRegularExpressionError,
    UnsupportedAssignorError,
)
from pykraft.client.types import OffsetAndMetadata
from pykraft.proto import common_pb2
from tests.unit.client.fake_broker import WAIT_S, FakeCluster, running
from tests.unit.client.fake_coordinator import running_group
from tests.waiting import wait_until

T0, T1, T2, T3 = (TopicPartition("t", p) for p in range(4))
Event = tuple[str, str, frozenset[TopicPartition]]


class Recorder(ConsumerRebalanceListener):
    """Appends (name, callback, partitions) to a list shared by every consumer of a test, and
    the name of the thread each call ran on to `threads`."""

    def __init__(self, name: str, events: list[Event]) -> None:
        self.name, self.events = name, events
        self.threads: set[str] = set()

    def _record(self, kind: str, partitions: set[TopicPartition]) -> None:
        self.threads.add(threading.current_thread().name)
        self.events.append((self.name, kind, frozenset(partitions)))

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._record("revoked", revoked)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._record("assigned", assigned)

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self._record("lost", lost)


def group_consumer(cluster: FakeCluster, **settings: object) -> Consumer:
    options: dict[str, object] = {
        "group_id": "g",
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 100,
        "auto_commit_interval_ms": 60000,
    }
    options.update(settings)
    return Consumer(bootstrap_servers=cluster.bootstrap, **options)  # type: ignore[arg-type]


def poll_until(
    consumers: list[Consumer],
    condition: Callable[[list[ConsumerRecord]], bool],
    what: str,
    records_max: int = 500,
) -> list[ConsumerRecord]:
    """Polls every consumer in turn (from this one thread) until `condition` holds for the
    records polled so far; returns them."""
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + WAIT_S
    while not condition(records):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for consumer in consumers:
            records += consumer.poll(timeout_ms=10, records_max=records_max)
    return records


def member_id(consumer: Consumer) -> str:
    assert consumer._group is not None
    return consumer._group.membership.member_id


def fill(cluster: FakeCluster, partitions: list[TopicPartition], count: int) -> None:
    for tp in partitions:
        cluster.append(tp, [b"%d-%d" % (tp.partition, i) for i in range(count)])


def test_a_member_starts_at_committed_offsets_else_by_auto_offset_reset() -> None:
    with running_group({"t": 2}) as (cluster, coordinator):
        fill(cluster, [T0, T1], 3)
        coordinator.committed[T0] = OffsetAndMetadata(1)
        events: list[Event] = []
        with group_consumer(cluster) as consumer:
            consumer.subscribe(["t"], listener=Recorder("c", events))
            records = poll_until([consumer], lambda got: len(got) >= 5, "5 records")
            assert sorted((r.partition, r.offset) for r in records) == [
                (0, 1),
                (0, 2),
                (1, 0),
                (1, 1),
                (1, 2),
            ]
            assert events == [("c", "assigned", frozenset({T0, T1}))]
            assert consumer.assignment() == {T0, T1}
            assert consumer.subscription() == {"t"}


def test_the_heartbeat_carries_the_whole_request_for_a_pattern_subscription() -> None:
    with running_group({"t": 2, "other": 1}) as (cluster, coordinator):
        consumer = group_consumer(
            cluster,
            group_instance_id="instance-1",
            client_id="app",
            max_poll_interval_ms=12345,
            group_remote_assignor="range",
        )
        with consumer:
            consumer.subscribe(pattern="t.*")
            poll_until([consumer], lambda _: consumer.assignment() == {T0, T1}, "t's partitions")
            wait_until(
                lambda: any(h.owned_partitions for h in coordinator.heartbeats),
                "an acknowledgement",
            )
            join = coordinator.heartbeats[0]
            assert join.member_epoch == 0
            assert len(join.member_id) == 32
            assert join.subscribed_topic_regex == "t.*"
            assert list(join.subscribed_topic_names) == []
            assert (join.instance_id, join.client_id, join.server_assignor) == (
                "instance-1",
                "app",
                "range",
            )
            assert join.rebalance_timeout_ms == 12345
            assert list(join.owned_partitions) == []
            ack = next(h for h in coordinator.heartbeats if h.owned_partitions)
            assert ack.member_id == join.member_id
            assert ack.member_epoch == coordinator.members[join.member_id].epoch > 0
            assert [(t.topic, list(t.partitions)) for t in ack.owned_partitions] == [("t", [0, 1])]
            assert ack.subscribed_topic_regex == "t.*"
            assert consumer.subscription() == {"t"}


@pytest.mark.parametrize("every_answer", [True, False], ids=["full", "changes"])
def test_a_new_member_gets_partitions_only_after_the_owner_revoked_them(every_answer: bool) -> None:
    with running_group({"t": 4}) as (cluster, coordinator):
        coordinator.always_send_assignment = every_answer
        fill(cluster, [T0, T1, T2, T3], 10)
        events: list[Event] = []
        a = group_consumer(cluster)
        b = group_consumer(cluster)
        with a, b:
            listeners = [Recorder("a", events), Recorder("b", events)]
            a.subscribe(["t"], listener=listeners[0])
            records = poll_until(
                [a],
                lambda got: len({r.partition for r in got}) == 4,
                "records of every partition",
                records_max=3,
            )
            kept_states = dict(a._subscription.partitions)
            assert all(s.fetches for s in kept_states.values()), "a has records buffered"
            b.subscribe(["t"], listener=listeners[1])
            records += poll_until(
                [a, b],
                lambda _: len(b.assignment()) == 2 and len(a.assignment()) == 2,
                "the partitions shared out",
                records_max=3,
            )
            records += poll_until(
                [a, b], lambda got: len(records) + len(got) >= 40, "every record", 3
            )

            moved = frozenset(b.assignment())
            kept = frozenset(a.assignment())
            assert moved | kept == {T0, T1, T2, T3}
            assert events == [
                ("a", "assigned", frozenset({T0, T1, T2, T3})),
                ("a", "revoked", moved),
                ("a", "assigned", frozenset()),
                ("b", "assigned", moved),
            ]
            assert {name for r in listeners for name in r.threads} == {
                threading.current_thread().name  # the polling thread, never a background one
            }
            for tp in kept:  # never touched: the same state, its buffer and position kept
                assert a._subscription.partitions[tp] is kept_states[tp]
            # a committed what it had handed out before revoking; b went on from there.
            seen = sorted((r.partition, r.offset) for r in records)
            assert seen == [(p, o) for p in range(4) for o in range(10)]


def test_auto_commit_commits_only_what_poll_returned() -> None:
    with running_group({"t": 1}) as (cluster, coordinator):
        fill(cluster, [T0], 10)
        with group_consumer(cluster, auto_commit_interval_ms=0) as consumer:
            consumer.subscribe(["t"])
            first = poll_until([consumer], bool, "records", records_max=2)
            assert [r.offset for r in first] == [0, 1]
            assert consumer._subscription.partitions[T0].fetches, "the rest is buffered"
            group = consumer._group
            assert group is not None
            in_flight = group._auto_commit
            wait_until(lambda: in_flight is None or in_flight.done.is_set(), "no auto commit")
            assert [r.offset for r in consumer.poll(timeout_ms=0, records_max=1)] == [2]
            wait_until(lambda: coordinator.commit_offset(T0) == 2, "the auto commit of 2")
            sent = [
                (p.committed_offset, p.committed_leader_epoch)
                for c in coordinator.commits
                for t in c.topics
                for p in t.partitions
            ]
            assert max(offset for offset, _ in sent) == 2
            assert (2, 0) in sent  # with the leader epoch of the batch read


def test_fencing_loses_the_partitions_without_committing_then_rejoins() -> None:
    with running_group({"t": 2}) as (cluster, coordinator):
        fill(cluster, [T0, T1], 3)
        events: list[Event] = []
        with group_consumer(cluster) as consumer:
            consumer.subscribe(["t"], listener=Recorder("c", events))
            poll_until([consumer], lambda _: consumer.assignment() == {T0, T1}, "the assignment")
            commits_before = len(coordinator.commits)
            joins_before = len([h for h in coordinator.heartbeats if h.member_epoch == 0])
            coordinator.fence(member_id(consumer))
            poll_until([consumer], lambda _: len(events) == 3, "lost, then assigned again")
            assert events == [
                ("c", "assigned", frozenset({T0, T1})),
                ("c", "lost", frozenset({T0, T1})),
                ("c", "assigned", frozenset({T0, T1})),
            ]
            assert len(coordinator.commits) == commits_before
            rejoins = [h for h in coordinator.heartbeats if h.member_epoch == 0][joins_before:]
            assert [(h.member_id, list(h.owned_partitions)) for h in rejoins] == [
                (member_id(consumer), [])
            ]


def test_on_partitions_lost_calls_on_partitions_revoked_by_default() -> None:
    revoked: list[set[TopicPartition]] = []

    class OnlyRevoked(ConsumerRebalanceListener):
        def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
            revoked.append(partitions)

    OnlyRevoked().on_partitions_lost({T0})
    assert revoked == [{T0}]


def test_a_listener_error_is_raised_by_poll_after_the_change_completed() -> None:
    class Failing(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
            raise RuntimeError("listener broke")

    with running_group({"t": 1}) as (cluster, coordinator), group_consumer(cluster) as consumer:
        consumer.subscribe(["t"], listener=Failing())
        with pytest.raises(RuntimeError, match="listener broke"):
            poll_until([consumer], lambda _: False, "the listener's error")
        assert consumer.assignment() == {T0}
        wait_until(lambda: coordinator.owned(member_id(consumer)) == {T0}, "the ack")


def test_a_member_that_stops_polling_leaves_and_the_next_poll_rejoins() -> None:
    with running_group({"t": 1}) as (cluster, coordinator):
        events: list[Event] = []
        with group_consumer(cluster, max_poll_interval_ms=300) as consumer:
            consumer.subscribe(["t"], listener=Recorder("c", events))
            poll_until([consumer], lambda _: consumer.assignment() == {T0}, "the assignment")
            wait_until(
                lambda: any(h.member_epoch == -1 for h in coordinator.heartbeats),
                "the leave after max_poll_interval_ms",
            )
            assert not coordinator.active()
            poll_until([consumer], lambda _: len(events) == 3, "lost, then assigned again")
            assert [kind for _, kind, _ in events] == ["assigned", "lost", "assigned"]
            leave = next(i for i, h in enumerate(coordinator.heartbeats) if h.member_epoch == -1)
            rejoin = coordinator.heartbeats[leave + 1]
            assert (rejoin.member_id, rejoin.member_epoch) == (member_id(consumer), 0)


def test_retriable_heartbeat_errors_are_retried() -> None:
    with running_group({"t": 1}) as (cluster, coordinator):
        coordinator.heartbeat_errors += [
            common_pb2.COORDINATOR_NOT_AVAILABLE,
            common_pb2.NOT_COORDINATOR,
            common_pb2.COORDINATOR_LOAD_IN_PROGRESS,
        ]
        with group_consumer(cluster, retry_backoff_ms=10) as consumer:
            consumer.subscribe(["t"])
            poll_until([consumer], lambda _: consumer.assignment() == {T0}, "the assignment")
            assert [h.member_epoch for h in coordinator.heartbeats[:4]] == [0, 0, 0, 0]


def test_a_fatal_heartbeat_error_is_raised_by_poll() -> None:
    with running_group({"t": 1}) as (cluster, coordinator):
        coordinator.heartbeat_errors.append(common_pb2.UNSUPPORTED_ASSIGNOR)
        with group_consumer(cluster, group_remote_assignor="nope") as consumer:
            consumer.subscribe(["t"])
            for _ in range(2):  # raised by every poll, not only the first
                with pytest.raises(UnsupportedAssignorError):
                    poll_until([consumer], lambda _: False, "the error")


def test_close_commits_revokes_and_leaves_and_a_static_member_gets_its_partitions_back() -> None:
    with running_group({"t": 1}) as (cluster, coordinator):
        fill(cluster, [T0], 6)
        events: list[Event] = []
        with group_consumer(cluster, group_instance_id="i-1") as consumer:
            consumer.subscribe(["t"], listener=Recorder("c", events))
            records = poll_until([consumer], bool, "records", records_max=3)
        assert [r.offset for r in records] == [0, 1, 2]
        assert events[-1] == ("c", "revoked", frozenset({T0}))
        assert coordinator.commit_offset(T0) == 3
        leave = coordinator.heartbeats[-1]
        assert (leave.member_epoch, leave.instance_id) == (-2, "i-1")
        epoch = coordinator.group_epoch

        with group_consumer(cluster, group_instance_id="i-1") as again:
            again.subscribe(["t"])
            rest = poll_until([again], bool, "records", records_max=3)
            assert [r.offset for r in rest] == [3, 4, 5]
            assert coordinator.group_epoch == epoch  # no rebalance

        coordinator.members.clear()  # the static member's reservation ends (its session)
        with group_consumer(cluster) as dynamic:
            dynamic.subscribe(["t"])
            poll_until([dynamic], lambda _: dynamic.assignment() == {T0}, "the assignment")
            dynamic_id = member_id(dynamic)
        assert coordinator.heartbeats[-1].member_epoch == -1
        assert dynamic_id not in coordinator.members


def test_the_listener_may_commit_while_close_revokes() -> None:
    class CommitOnRevoke(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
            consumer.commit()

    with running_group({"t": 1}) as (cluster, coordinator):
        fill(cluster, [T0], 5)
        consumer = group_consumer(cluster, enable_auto_commit=False)
        consumer.subscribe(["t"], listener=CommitOnRevoke())
        poll_until([consumer], bool, "records", records_max=2)
        assert coordinator.commit_offset(T0) is None
        consumer.close()
        assert coordinator.commit_offset(T0) == 2
        assert coordinator.heartbeats[-1].member_epoch == -1


def test_close_from_another_thread_ends_a_waiting_poll_then_leaves() -> None:
    with running_group({"t": 1}) as (cluster, coordinator):
        consumer = group_consumer(cluster)
        consumer.subscribe(["t"])
        poll_until([consumer], lambda _: consumer.assignment() == {T0}, "the assignment")
        polled: list[list[ConsumerRecord]] = []
        poller = threading.Thread(target=lambda: polled.append(consumer.poll(timeout_ms=60000)))
        poller.start()
        wait_until(
            lambda: consumer._group is not None and consumer._group.membership.in_poll, "poll"
        )
        consumer.close()
        poller.join(WAIT_S)
        assert polled == [[]]
        assert coordinator.heartbeats[-1].member_epoch == -1


def test_unsubscribe_revokes_and_leaves_and_subscribe_rejoins_with_the_same_id() -> None:
    with running_group({"t": 1}) as (cluster, coordinator):
        events: list[Event] = []
        with group_consumer(cluster) as consumer:
            consumer.subscribe(["t"], listener=Recorder("c", events))
            poll_until([consumer], lambda _: consumer.assignment() == {T0}, "the assignment")
            consumer.unsubscribe()
            assert events[-1] == ("c", "revoked", frozenset({T0}))
            assert coordinator.heartbeats[-1].member_epoch == -1
            assert consumer.assignment() == set()
            assert consumer.subscription() == set()
            consumer.subscribe(["t"])
            poll_until([consumer], lambda _: consumer.assignment() == {T0}, "the assignment again")
            joins = [h.member_id for h in coordinator.heartbeats if h.member_epoch == 0]
            assert joins == [member_id(consumer)] * 2


def test_iteration_reconciles_too() -> None:
    with running_group({"t": 2}) as (cluster, _):
        fill(cluster, [T0, T1], 2)
        with group_consumer(cluster) as consumer:
            consumer.subscribe(["t"])
            got = []
            for record in consumer:
                got.append((record.partition, record.offset))
                if len(got) == 4:
                    break
            assert sorted(got) == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_subscribe_and_assign_exclude_each_other() -> None:
    with running({"t": 1}) as cluster, group_consumer(cluster) as consumer:
        consumer.assign([T0])
        with pytest.raises(IllegalStateError, match="unsubscribe"):
            consumer.subscribe(["t"])
        consumer.unsubscribe()
        consumer.subscribe(["t"])
        with pytest.raises(IllegalStateError, match="unsubscribe"):
            consumer.assign([T0])
        consumer.assign([])  # Kafka's: an empty assignment unsubscribes
        assert consumer.subscription() == set()
        consumer.assign([T0])
        assert consumer.assignment() == {T0}


def test_subscribe_arguments_are_checked() -> None:
    with running({"t": 1}) as cluster, group_consumer(cluster) as consumer:
        with pytest.raises(ValueError, match="exactly one"):
            consumer.subscribe()
        with pytest.raises(ValueError, match="exactly one"):
            consumer.subscribe(["t"], pattern="t.*")
        with pytest.raises(TypeError, match=r"\['t'\]"):
            consumer.subscribe("t")
        with pytest.raises(InvalidRegularExpressionError, match="does not compile"):
            consumer.subscribe(pattern="t(")
        with pytest.raises(TypeError, match="ConsumerRebalanceListener"):
            consumer.subscribe(["t"], listener=object())  # type: ignore[arg-type]


def test_group_calls_without_a_group_id_raise_invalid_group_id() -> None:
    with running({"t": 1}) as cluster, Consumer(bootstrap_servers=cluster.bootstrap) as consumer:
        calls: list[Callable[[], object]] = [
            lambda: consumer.subscribe(["t"]),
            lambda: consumer.commit(),
            lambda: consumer.commit_async(),
            lambda: consumer.committed([T0]),
        ]
        for call in calls:
            with pytest.raises(InvalidGroupIdError, match="group_id"):
                call()
        assert consumer.subscription() == set()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"group_id": ""}, "group_id must be a non-empty string"),
        ({"group_id": None, "group_instance_id": "i"}, "needs a group_id"),
        ({"group_remote_assignor": ""}, "group_remote_assignor"),
        ({"enable_auto_commit": "yes"}, "enable_auto_commit"),
        ({"auto_commit_interval_ms": -1}, "auto_commit_interval_ms"),
        ({"max_poll_interval_ms": 0}, "max_poll_interval_ms"),
        ({"max_poll_interval_ms": 2**31}, "max_poll_interval_ms"),
    ],
)
def test_group_settings_are_checked(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Consumer(bootstrap_servers="127.0.0.1:1", **settings)  # type: ignore[arg-type]
