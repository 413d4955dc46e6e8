"""The broker's session stream (`SessionStream`) against in-process fake controllers: it opens
with the broker epoch of the moment, follows a NOT_CONTROLLER redirect at once, opens again with
the new epoch after `reopen`, and ends for good on `stop`, which the controller sees."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import grpc
import pytest

from pykraft.broker.controller_channel import ControllerCaller
from pykraft.broker.controller_session import SessionStream
from pykraft.proto import common_pb2, controller_pb2, controller_pb2_grpc
from pykraft.server_common.grpc_server import start_server
from tests.ports import free_port

WAIT_S = 10.0  # the deadline of every wait below; the steps themselves take milliseconds
RETRY_MS = 50


class FakeController(controller_pb2_grpc.ControllerServiceServicer):
    """Answers BrokerSession as active (holding the stream until the broker ends it) or, with
    `redirect_to`, NOT_CONTROLLER naming that address. Notes every open and end."""

    def __init__(self, redirect_to: str = "") -> None:
        self.redirect_to = redirect_to
        self.opened: list[int] = []  # the broker epoch of each stream opened here
        self.ended = 0
        self.changed = threading.Condition()

    def BrokerSession(
        self, request: controller_pb2.BrokerSessionRequest, context: grpc.ServicerContext
    ) -> Iterator[controller_pb2.BrokerSessionResponse]:
        if self.redirect_to:
            header = common_pb2.ResponseHeader(
                error_code=common_pb2.NOT_CONTROLLER,
                error_message="not the active controller",
                controller_address=self.redirect_to,
            )
            yield controller_pb2.BrokerSessionResponse(header=header)
            return
        gone = threading.Event()

        def on_end() -> None:  # runs even when gRPC never resumes this generator
            gone.set()
            with self.changed:
                self.ended += 1
                self.changed.notify_all()

        assert context.add_callback(on_end)
        with self.changed:
            self.opened.append(request.broker_epoch)
            self.changed.notify_all()
        yield controller_pb2.BrokerSessionResponse()
        gone.wait(WAIT_S * 2)  # held until the broker ends it

    def wait(self, what: str, condition: object) -> None:
        with self.changed:
            assert self.changed.wait_for(condition, timeout=WAIT_S), f"never {what}"  # type: ignore[arg-type]


@pytest.fixture
def controllers() -> Iterator[tuple[FakeController, FakeController, str]]:
    """An active fake controller, and a standby one (the bootstrap address) redirecting to it."""
    active_address = f"127.0.0.1:{free_port()}"
    standby_address = f"127.0.0.1:{free_port()}"
    active, standby = FakeController(), FakeController(redirect_to=active_address)
    add = controller_pb2_grpc.add_ControllerServiceServicer_to_server
    servers = [
        start_server(active_address, 4, [(add, active)]),
        start_server(standby_address, 4, [(add, standby)]),
    ]
    try:
        yield active, standby, standby_address
    finally:
        for server in servers:
            server.stop(grace=None)


def test_follows_the_redirect_reopens_with_the_new_epoch_and_ends_on_stop(
    controllers: tuple[FakeController, FakeController, str],
) -> None:
    active, standby, bootstrap = controllers
    caller = ControllerCaller([bootstrap])
    epoch = [7]
    stream = SessionStream(caller, broker_id=1, broker_epoch=lambda: epoch[0], retry_ms=RETRY_MS)
    stream.start()
    try:
        active.wait("opened at the active controller", lambda: active.opened == [7])
        assert standby.opened == []  # it only redirected
        epoch[0] = 9  # registered again
        stream.reopen()
        active.wait("reopened with the new epoch", lambda: active.opened == [7, 9])
        active.wait("the first stream's end seen", lambda: active.ended == 1)
    finally:
        stream.stop()
        caller.close()
    active.wait("the end of the stream seen", lambda: active.ended == 2)
    assert active.opened == [7, 9]  # nothing opened after stop
