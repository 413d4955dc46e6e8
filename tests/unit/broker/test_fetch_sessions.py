"""Fetch sessions (KIP-227) between a follower's `FollowerSession` and a real leader's
ReplicaManager (broker 1, leading three partitions that broker 2 follows): after the request
that opens the session, a request names only what changed, and an answer holds only the
partitions with something new, whether the follower named them or not (issue 17 §7)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.broker.controller_channel import monotonic_ms
from pykraft.broker.fetch import handle_fetch
from pykraft.broker.fetch_sessions import FetchSessions
from pykraft.broker.follower_session import FetchState, FollowerSession
from pykraft.broker.partition_watches import PartitionWatches
from pykraft.proto import broker_pb2, common_pb2
from tests.waiting import wait_until

from .replica_harness import Harness, record_values

FOLLOWER = 2
PARTITIONS = 3


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path, assignments=[(1, FOLLOWER)] * PARTITIONS)
    yield harness
    harness.manager.close()


class _Follower:
    """Broker 2's side: what its fetcher would send, in its session, and its log ends."""

    def __init__(self, leader: Harness) -> None:
        self.leader = leader
        self.session = FollowerSession()
        self.offsets = dict.fromkeys(range(PARTITIONS), 0)
        self.last_request = broker_pb2.FetchRequest()

    def fetch(
        self, *, wait_ms: int = 0, bytes_max: int = 1 << 20
    ) -> dict[int, broker_pb2.FetchPartitionResult]:
        """One request and its answer, taken as the fetcher takes it: the records found move
        this follower's offsets on."""
        request = broker_pb2.FetchRequest(
            replica_id=FOLLOWER,
            replica_epoch=1,
            max_wait_ms=wait_ms,
            min_bytes=1,
            max_bytes=bytes_max,
        )
        wanted = {("orders", p): _state(offset) for p, offset in self.offsets.items()}
        self.session.fill(request, wanted)
        self.last_request = request
        response = handle_fetch(self.leader.manager, request, monotonic_ms)
        assert self.session.answered(response), response.header.error_message
        results = {p.partition: p for t in response.topics for p in t.partitions}
        for partition, result in results.items():
            if result.records:
                self.offsets[partition] = record_values(result.records)[-1][0] + 1
        return results

    def named(self) -> set[int]:
        return {p.partition for t in self.last_request.topics for p in t.partitions}

    def forgotten(self) -> set[int]:
        return {p for t in self.last_request.forgotten for p in t.partitions}


def _state(offset: int) -> FetchState:
    return FetchState(
        current_leader_epoch=-1,
        fetch_offset=offset,
        last_fetched_epoch=-1 if offset == 0 else 0,
        log_start_offset=0,
        partition_max_bytes=1 << 20,
    )


def _with_records(results: dict[int, broker_pb2.FetchPartitionResult]) -> set[int]:
    return {p for p, result in results.items() if result.records}


def test_after_opening_a_follower_names_only_what_moved_and_hears_only_what_is_new(
    leader: Harness,
) -> None:
    follower = _Follower(leader)
    follower.fetch()
    assert follower.named() == {0, 1, 2}  # the request that opens the session names all
    assert follower.session.session_id != 0
    assert leader.produce(1, [b"a", b"b"]).error_code == common_pb2.NONE
    first = follower.fetch()
    assert follower.named() == set()  # no fetch changed
    assert set(first) == _with_records(first) == {1}
    assert follower.offsets[1] == 2
    follower.fetch()
    assert follower.named() == {1}  # its fetch moved on; the answer carries the new mark
    idle = follower.fetch()
    assert (follower.named(), idle) == (set(), {})


def test_a_parked_session_fetch_wakes_for_a_partition_it_did_not_name(leader: Harness) -> None:
    follower = _Follower(leader)
    follower.fetch()
    answered: list[dict[int, broker_pb2.FetchPartitionResult]] = []
    waiter = threading.Thread(target=lambda: answered.append(follower.fetch(wait_ms=30_000)))
    waiter.start()
    wait_until(lambda: leader.manager.fetch_waits.held == 1, "the session fetch parks")
    assert leader.produce(2, [b"late"]).error_code == common_pb2.NONE
    waiter.join(timeout=10)
    assert follower.named() == set()
    assert _with_records(answered[0]) == {2}


def test_a_partition_left_out_for_size_is_answered_next_though_nothing_changed(
    leader: Harness,
) -> None:
    for partition in (0, 1):
        assert leader.produce(partition, [b"x" * 100]).error_code == common_pb2.NONE
    follower = _Follower(leader)
    first = follower.fetch(bytes_max=1)  # the first batch found is sent whole, no other
    assert _with_records(first) == {0}
    second = follower.fetch()
    assert follower.named() == {0}
    assert 1 in _with_records(second)


def test_forgotten_partitions_are_no_longer_watched_or_answered(leader: Harness) -> None:
    follower = _Follower(leader)
    follower.fetch()
    del follower.offsets[2]
    follower.fetch()
    assert follower.forgotten() == {2}
    assert leader.produce(2, [b"unseen"]).error_code == common_pb2.NONE
    assert follower.fetch() == {}


def test_a_request_that_does_not_fit_its_session_is_refused_and_the_next_opens_one(
    leader: Harness,
) -> None:
    follower = _Follower(leader)
    follower.fetch()
    session_id, epoch = follower.session.session_id, follower.session.epoch
    cases = [
        (FOLLOWER, session_id, epoch + 5, common_pb2.INVALID_FETCH_SESSION_EPOCH),
        (FOLLOWER, session_id + 1, epoch, common_pb2.FETCH_SESSION_ID_NOT_FOUND),
        (3, session_id, epoch, common_pb2.FETCH_SESSION_ID_NOT_FOUND),  # not its session
    ]
    for replica_id, asked_id, asked_epoch, code in cases:
        request = broker_pb2.FetchRequest(
            replica_id=replica_id, session_id=asked_id, session_epoch=asked_epoch
        )
        refused = handle_fetch(leader.manager, request, monotonic_ms)
        assert refused.header.error_code == code, refused.header.error_message
        assert str(asked_id) in refused.header.error_message
    follower.session.answered(refused)  # a refusal drops the follower's session
    follower.fetch()
    assert follower.named() == {0, 1, 2}
    assert follower.session.session_id not in (0, session_id)  # a new session


def test_a_whole_fetch_from_the_same_follower_replaces_its_session(leader: Harness) -> None:
    old, new = _Follower(leader), _Follower(leader)
    old.fetch()
    new.fetch()
    assert len(leader.manager.fetch_sessions) == 1
    request = broker_pb2.FetchRequest(
        replica_id=FOLLOWER, session_id=old.session.session_id, session_epoch=old.session.epoch
    )
    answer = handle_fetch(leader.manager, request, monotonic_ms)
    assert answer.header.error_code == common_pb2.FETCH_SESSION_ID_NOT_FOUND


def _opening(replica_id: int) -> broker_pb2.FetchRequest:
    request = broker_pb2.FetchRequest(replica_id=replica_id, session_epoch=0)
    request.topics.add(topic="orders").partitions.add(partition=replica_id)
    return request


def test_a_full_cache_evicts_only_idle_sessions_else_fetches_go_without_one() -> None:
    watches = PartitionWatches()
    sessions = FetchSessions(watches, sessions_max=1, idle_ms_max=1_000, seed=7)
    first, _ = sessions.session_for(_opening(2), now_ms=0)
    assert first is not None
    assert sessions.session_for(_opening(3), now_ms=1_000)[0] is None  # in use lately
    second, _ = sessions.session_for(_opening(3), now_ms=1_001)
    assert second is not None and len(sessions) == 1  # the idle one went
    assert set(watches._by_key) == {("orders", 3)}  # and stopped watching its partition


def test_a_follower_session_without_an_id_from_the_leader_stays_whole() -> None:
    session = FollowerSession()
    wanted = {("orders", 0): _state(0)}
    for _ in range(2):
        request = broker_pb2.FetchRequest()
        session.fill(request, wanted)
        assert (request.session_epoch, len(request.topics)) == (0, 1)
        assert session.answered(broker_pb2.FetchResponse(session_id=0))
    request = broker_pb2.FetchRequest()
    session.fill(request, wanted)
    assert session.answered(broker_pb2.FetchResponse(session_id=9))
    session.fill(request := broker_pb2.FetchRequest(), wanted)
    assert (request.session_id, request.session_epoch, len(request.topics)) == (9, 1, 0)
    assert not session.answered(broker_pb2.FetchResponse(session_id=8))  # not its session
    session.fill(request := broker_pb2.FetchRequest(), wanted)
    assert (request.session_epoch, len(request.topics)) == (0, 1)


def test_a_request_still_running_in_a_replaced_session_watches_nothing_again() -> None:
    watches = PartitionWatches()
    sessions = FetchSessions(watches, seed=7)
    old, _ = sessions.session_for(_opening(2), now_ms=0)
    assert old is not None
    sessions.session_for(_opening(2), now_ms=1)  # the follower gave up on `old` and reopened
    late = broker_pb2.FetchRequest(replica_id=2, session_id=old.session_id, session_epoch=1)
    late.topics.add(topic="orders").partitions.add(partition=9)
    old.name(late)  # as the request that was on its way when the session was replaced
    assert all(old.watch not in watching for watching in watches._by_key.values())
    assert set(watches._by_key) == {("orders", 2)}
