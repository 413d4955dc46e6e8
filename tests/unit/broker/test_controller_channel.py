"""The heartbeat state logic of ControllerChannel, with the controller's answers scripted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from google.protobuf.message import Message

from pykraft.broker.config import BrokerConfig
from pykraft.broker.controller_channel import ControllerCaller, ControllerChannel
from pykraft.broker.lifecycle import BrokerLifecycle, BrokerState
from pykraft.proto import common_pb2, controller_pb2

_R = TypeVar("_R", bound=Message)


class ScriptedCaller(ControllerCaller):
    """Registers with epochs 7, 8, ...; answers heartbeats from `heartbeats` (the last one again
    once only it is left, so a heartbeat thread never runs dry); keeps requests."""

    def __init__(self) -> None:
        super().__init__(["127.0.0.1:1"])
        self.heartbeats: list[controller_pb2.BrokerHeartbeatResponse] = []
        self.requests: list[Message] = []
        self.next_epoch = 7

    def call(
        self,
        method: str,
        request: Message,
        response_type: type[_R],
        timeout_s: float,
        *,
        stub_class: type[Any] = object,
    ) -> _R:
        self.requests.append(request)
        if method == "RegisterBroker":
            self.next_epoch += 1
            return response_type(broker_epoch=self.next_epoch - 1)
        response = self.heartbeats.pop(0) if len(self.heartbeats) > 1 else self.heartbeats[0]
        assert isinstance(response, response_type)
        return response


class Clock:
    def __init__(self) -> None:
        self.now_ms = 0

    def __call__(self) -> int:
        return self.now_ms


class Setup:
    def __init__(self) -> None:
        config = BrokerConfig(
            node_id=1,
            listener="127.0.0.1:9191",
            log_dirs=(Path("/unused"),),
            controller_bootstrap_servers=("127.0.0.1:1",),
            session_timeout_ms=9000,
        )
        self.caller, self.lifecycle, self.clock = ScriptedCaller(), BrokerLifecycle(), Clock()
        self.channel = ControllerChannel(
            config, self.caller, self.lifecycle, lambda: 42, self.clock
        )
        self.lifecycle.transition(BrokerState.STARTING)
        assert self.channel.register()

    def heartbeat(self, *, is_caught_up: bool, is_fenced: bool) -> None:
        response = controller_pb2.BrokerHeartbeatResponse(
            is_caught_up=is_caught_up, is_fenced=is_fenced
        )
        self.caller.heartbeats[:] = [response]
        self.channel.heartbeat()


@pytest.fixture
def setup() -> Iterator[Setup]:
    setup = Setup()
    yield setup
    setup.channel.stop()


def test_caught_up_then_unfenced_moves_to_running(setup: Setup) -> None:
    assert setup.channel.broker_epoch == 7
    setup.heartbeat(is_caught_up=False, is_fenced=True)
    assert setup.lifecycle.state.name == "STARTING"
    assert not setup.channel.may_serve(0)
    setup.heartbeat(is_caught_up=True, is_fenced=True)
    assert setup.lifecycle.state.name == "RECOVERY"
    setup.heartbeat(is_caught_up=True, is_fenced=False)
    assert setup.lifecycle.state.name == "RUNNING"
    assert setup.channel.may_serve(0)
    request = setup.caller.requests[-1]
    assert isinstance(request, controller_pb2.BrokerHeartbeatRequest)
    assert (request.broker_epoch, request.current_metadata_offset) == (7, 42)


def test_without_a_heartbeat_for_the_session_timeout_it_may_not_serve(setup: Setup) -> None:
    setup.heartbeat(is_caught_up=True, is_fenced=False)
    assert setup.channel.may_serve(8_999)
    assert not setup.channel.may_serve(9_000)
    setup.clock.now_ms = 10_000
    setup.heartbeat(is_caught_up=True, is_fenced=False)
    assert setup.channel.may_serve(10_001)


def test_fenced_by_the_controller_goes_back_to_recovery(setup: Setup) -> None:
    setup.heartbeat(is_caught_up=True, is_fenced=False)
    setup.heartbeat(is_caught_up=True, is_fenced=True)
    assert setup.lifecycle.state.name == "RECOVERY"
    assert not setup.channel.may_serve(0)


def test_a_stale_epoch_registers_again(setup: Setup) -> None:
    stale = controller_pb2.BrokerHeartbeatResponse()
    stale.header.error_code = common_pb2.STALE_BROKER_EPOCH
    setup.caller.heartbeats[:] = [stale]
    setup.channel.heartbeat()
    assert setup.channel.broker_epoch == 8
    assert not setup.channel.may_serve(0)


def test_controlled_shutdown_waits_for_should_shut_down(setup: Setup) -> None:
    setup.heartbeat(is_caught_up=True, is_fenced=False)
    setup.caller.heartbeats[:] = [
        controller_pb2.BrokerHeartbeatResponse(is_fenced=False),
        controller_pb2.BrokerHeartbeatResponse(is_fenced=True, should_shut_down=True),
    ]
    setup.lifecycle.transition(BrokerState.PENDING_CONTROLLED_SHUTDOWN)
    assert not setup.channel.controlled_shutdown(timeout_ms=0)  # no heartbeat thread: gives up
    setup.channel.start()
    setup.clock.now_ms = 0
    assert setup.channel.controlled_shutdown(timeout_ms=1_000_000)
    requests = [
        r for r in setup.caller.requests if isinstance(r, controller_pb2.BrokerHeartbeatRequest)
    ]
    assert requests[-1].want_shut_down


def test_a_heartbeat_names_the_controllers_looked_for_from_then_on(setup: Setup) -> None:
    setup.caller.heartbeats[:] = [
        controller_pb2.BrokerHeartbeatResponse(controller_listeners=["127.0.0.1:4", "127.0.0.1:5"])
    ]
    setup.channel.heartbeat()
    assert [setup.caller._target() for _ in range(4)] == ["127.0.0.1:4", "127.0.0.1:5"] * 2
    setup.heartbeat(is_caught_up=True, is_fenced=False)  # names none: the last ones stay
    assert {setup.caller._target() for _ in range(2)} == {"127.0.0.1:4", "127.0.0.1:5"}
