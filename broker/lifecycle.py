"""Kafka's BrokerState and the transitions a broker may make between them.

NOT_RUNNING -> STARTING (registered, catching up with metadata) -> RECOVERY (caught up, waiting
to be unfenced) -> RUNNING -> PENDING_CONTROLLED_SHUTDOWN -> SHUTTING_DOWN -> NOT_RUNNING. A
broker may be told to stop in any state, so every state may go to SHUTTING_DOWN. `BrokerLifecycle`
is the thread-safe holder; an illegal edge is a bug and raises.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final


class BrokerState(enum.IntEnum):
    """Kafka's numbers (org.apache.kafka.metadata.BrokerState)."""

    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7


_S = BrokerState
TRANSITIONS: Final[Mapping[BrokerState, frozenset[BrokerState]]] = MappingProxyType(
    {
        _S.NOT_RUNNING: frozenset({_S.STARTING, _S.SHUTTING_DOWN}),
        _S.STARTING: frozenset({_S.RECOVERY, _S.PENDING_CONTROLLED_SHUTDOWN, _S.SHUTTING_DOWN}),
        _S.RECOVERY: frozenset({_S.RUNNING, _S.PENDING_CONTROLLED_SHUTDOWN, _S.SHUTTING_DOWN}),
        # A running broker fenced by the controller (session lapsed) goes back to RECOVERY.
        _S.RUNNING: frozenset({_S.RECOVERY, _S.PENDING_CONTROLLED_SHUTDOWN, _S.SHUTTING_DOWN}),
        _S.PENDING_CONTROLLED_SHUTDOWN: frozenset({_S.SHUTTING_DOWN}),
        _S.SHUTTING_DOWN: frozenset({_S.NOT_RUNNING}),
    }
)


class IllegalTransitionError(RuntimeError):
    """A move between two states the lifecycle does not allow."""


def check_transition(current: BrokerState, target: BrokerState) -> None:
    """Raises IllegalTransitionError unless `current -> target` is an edge of TRANSITIONS."""
    if target not in TRANSITIONS[current]:
        raise IllegalTransitionError(f"broker state cannot go from {current.name} to {target.name}")


class BrokerLifecycle:
    """The broker's current state, shared by its threads."""

    def __init__(self) -> None:
        self._state = BrokerState.NOT_RUNNING
        self._lock = threading.Lock()

    @property
    def state(self) -> BrokerState:
        return self._state

    def transition(self, target: BrokerState) -> None:
        """Moves to `target`; raises IllegalTransitionError on an edge the table lacks."""
        with self._lock:
            check_transition(self._state, target)
            self._state = target

    def transition_if(self, current: BrokerState, target: BrokerState) -> bool:
        """Moves to `target` only if the state is `current`; says whether it moved."""
        with self._lock:
            if self._state is not current:
                return False
            check_transition(current, target)
            self._state = target
            return True
