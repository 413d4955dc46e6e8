"""`ControllerCaller.call_stream` against an in-process fake controller: its timeout bounds the
wait for each answer, not the whole stream, so a reader that takes longer over the stream than the
timeout (a broker replaying a million-partition image) still reads it whole, while a controller
that stops sending mid-stream is given up on within about the timeout."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from pykraft.broker.controller_channel import ControllerCaller, ControllerUnavailableError
from pykraft.proto import controller_pb2, controller_pb2_grpc
from pykraft.server_common.grpc_server import start_server
from tests.ports import free_port

MESSAGES = 6
TIMEOUT_S = 0.5  # the caller's timeout: the longest wait for any one answer
REPLAY_S = 0.25  # what the reader spends on each answer: together far longer than TIMEOUT_S
STALL_S = 10.0  # how long the stalling controller holds back its second answer


class FakeController(controller_pb2_grpc.ControllerServiceServicer):
    """Streams MESSAGES MetadataFetch answers at once; with `stall`, only the first, then holds
    the stream open until the test ends."""

    def __init__(self, *, stall: bool) -> None:
        self.stall = stall
        self.released = threading.Event()

    def MetadataFetch(
        self, request: controller_pb2.MetadataFetchRequest, context: grpc.ServicerContext
    ) -> Iterator[controller_pb2.MetadataFetchResponse]:
        for index in range(MESSAGES):
            if index == 1 and self.stall:
                self.released.wait(STALL_S)
                return
            yield controller_pb2.MetadataFetchResponse(high_watermark=index)


def serve(stall: bool) -> tuple[FakeController, grpc.Server, str]:
    address = f"127.0.0.1:{free_port()}"
    controller = FakeController(stall=stall)
    add = controller_pb2_grpc.add_ControllerServiceServicer_to_server
    return controller, start_server(address, 4, [(add, controller)]), address


def fetch(caller: ControllerCaller) -> Iterator[controller_pb2.MetadataFetchResponse]:
    request = controller_pb2.MetadataFetchRequest(broker_id=1, after_offset=-1)
    return caller.call_stream(
        "MetadataFetch", request, controller_pb2.MetadataFetchResponse, TIMEOUT_S
    )


def test_a_stream_read_for_longer_than_the_timeout_is_read_whole() -> None:
    _controller, server, address = serve(stall=False)
    caller = ControllerCaller([address])
    try:
        seen = []
        for response in fetch(caller):
            seen.append(response.high_watermark)
            time.sleep(REPLAY_S)  # stands in for replaying a large message
        assert seen == list(range(MESSAGES))
    finally:
        caller.close()
        server.stop(grace=None)


def test_a_controller_silent_mid_stream_is_given_up_on_within_about_the_timeout() -> None:
    controller, server, address = serve(stall=True)
    caller = ControllerCaller([address])
    try:
        responses = fetch(caller)
        assert next(responses).high_watermark == 0
        started = time.monotonic()
        with pytest.raises(ControllerUnavailableError, match="no answer within"):
            next(responses)
        assert time.monotonic() - started < STALL_S / 2
    finally:
        controller.released.set()
        caller.close()
        server.stop(grace=None)
