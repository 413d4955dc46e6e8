from __future__ import annotations

import pytest

from pykraft.broker.lifecycle import (
    TRANSITIONS,
    BrokerLifecycle,
    BrokerState,
    IllegalTransitionError,
    check_transition,
)


def test_the_normal_life_of_a_broker_is_allowed() -> None:
    lifecycle = BrokerLifecycle()
    path = [
        BrokerState.STARTING,
        BrokerState.RECOVERY,
        BrokerState.RUNNING,
        BrokerState.PENDING_CONTROLLED_SHUTDOWN,
        BrokerState.SHUTTING_DOWN,
        BrokerState.NOT_RUNNING,
    ]
    for state in path:
        lifecycle.transition(state)
        assert lifecycle.state is state


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (BrokerState.NOT_RUNNING, BrokerState.RUNNING),
        (BrokerState.STARTING, BrokerState.RUNNING),
        (BrokerState.RUNNING, BrokerState.STARTING),
        (BrokerState.PENDING_CONTROLLED_SHUTDOWN, BrokerState.RUNNING),
        (BrokerState.SHUTTING_DOWN, BrokerState.RUNNING),
        (BrokerState.NOT_RUNNING, BrokerState.NOT_RUNNING),
    ],
)
def test_illegal_edges_raise(current: BrokerState, target: BrokerState) -> None:
    with pytest.raises(IllegalTransitionError, match=f"{current.name} to {target.name}"):
        check_transition(current, target)


def test_every_state_may_shut_down_and_the_table_covers_every_state() -> None:
    assert set(TRANSITIONS) == set(BrokerState)
    for state in BrokerState:
        if state is not BrokerState.SHUTTING_DOWN:
            assert BrokerState.SHUTTING_DOWN in TRANSITIONS[state], state


def test_transition_if_moves_only_from_the_named_state() -> None:
    lifecycle = BrokerLifecycle()
    assert not lifecycle.transition_if(BrokerState.RECOVERY, BrokerState.RUNNING)
    assert lifecycle.state.name == "NOT_RUNNING"
    lifecycle.transition(BrokerState.STARTING)
    assert lifecycle.transition_if(BrokerState.STARTING, BrokerState.RECOVERY)
    assert lifecycle.state.name == "RECOVERY"


def test_kafka_numbers() -> None:
    numbers = {state.name: int(state) for state in BrokerState}
    assert numbers["RUNNING"] == 3 and numbers["PENDING_CONTROLLED_SHUTDOWN"] == 6
