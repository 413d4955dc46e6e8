"""The leader's choice of a consumer's read replica (KIP-392, Kafka's RackAwareReplicaSelector
and ReplicaManager.findPreferredReadReplica), as tables."""

from __future__ import annotations

import pytest

from pykraft.broker.isr import FollowerState
from pykraft.broker.replica_selector import (
    LEADER_SELECTOR,
    RACK_AWARE_SELECTOR,
    ReplicaView,
    preferred_read_replica,
    read_candidates,
)

_RACKS = {1: "r1", 2: "r2", 3: "r3", 4: "r2"}
_LEADER = ReplicaView(1, "r1", log_end_offset=100, caught_up_ago_ms=0)
_NOW_MS = 10_000


def _state(log_end_offset: int, *, caught_up_ms: int = _NOW_MS, start: int = 0) -> FollowerState:
    return FollowerState(
        log_end_offset=log_end_offset, last_caught_up_ms=caught_up_ms, log_start_offset=start
    )


def _choose(
    followers: dict[int, FollowerState],
    *,
    client_rack: str = "r2",
    fetch_offset: int = 50,
    isr: tuple[int, ...] = (1, 2, 3, 4),
    racks: dict[int, str] = _RACKS,
    selector: str = RACK_AWARE_SELECTOR,
    leader: ReplicaView = _LEADER,
) -> int | None:
    candidates = read_candidates(
        isr=isr, followers=followers, racks=racks, fetch_offset=fetch_offset, now_ms=_NOW_MS
    )
    return preferred_read_replica(selector, client_rack, leader, candidates)


def test_an_in_sync_follower_in_the_consumers_rack_is_preferred() -> None:
    assert _choose({2: _state(100), 3: _state(100)}) == 2
    assert _choose({2: _state(100), 3: _state(100)}, client_rack="r3") == 3


@pytest.mark.parametrize(
    ("why", "kwargs"),
    [
        ("no rack named", {"client_rack": ""}),
        ("the leader is in the consumer's rack", {"client_rack": "r1"}),
        ("no replica in the consumer's rack", {"client_rack": "r9"}),
        ("the default selector", {"selector": ""}),
        ("Kafka's LeaderSelector", {"selector": LEADER_SELECTOR}),
        ("out of the ISR", {"isr": (1, 3)}),
        ("not alive (fenced or shutting down)", {"racks": {1: "r1", 3: "r3"}}),
        ("lagging: its log ends before the fetch offset", {"fetch_offset": 101}),
        ("its log starts after the fetch offset", {"fetch_offset": 4}),
    ],
)
def test_the_leader_serves(why: str, kwargs: dict[str, object]) -> None:
    followers = {2: _state(100, start=5), 3: _state(100)}
    assert _choose(followers, **kwargs) is None, why  # type: ignore[arg-type]


def test_a_follower_that_holds_the_fetch_offset_exactly_may_serve() -> None:
    assert _choose({2: _state(50, start=50)}, fetch_offset=50) == 2


def test_among_several_in_the_rack_the_most_caught_up_wins() -> None:
    ahead = {2: _state(90), 4: _state(100)}
    assert _choose(ahead) == 4
    # Equal log ends: the one caught up most recently, then the highest id.
    assert _choose({2: _state(100, caught_up_ms=_NOW_MS), 4: _state(100, caught_up_ms=1)}) == 2
    assert _choose({2: _state(100), 4: _state(100)}) == 4
