"""A controller serves more brokers than it has request threads.

Each broker holds a BrokerSession stream to the active controller for as long as it lives, and
gRPC's synchronous server gives a held stream one worker thread. With one pool for everything,
64 brokers took all 64 workers and the controller answered nothing more: no heartbeat, no
registration, no admin request (`grpc.workers.max` counts short requests only now).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from pathlib import Path
from typing import Any

import pytest

from pykraft.proto import common_pb2, controller_pb2

from .controllers import Quorum, StandInBroker, running_quorum
from .processes import wait_for

pytestmark = pytest.mark.integration

BROKERS = 80  # more than the controller's default grpc.workers.max (64)
ANSWER_WAIT_S = 10
# Each stream ends by this deadline: far longer than the test, and a bound if one is never served.
STREAM_DEADLINE_S = 120


def _open_sessions(quorum: Quorum, brokers: list[StandInBroker]) -> list[Any]:
    """Opens one session stream per broker on the active controller and waits for each answer
    (the first message of the stream) for at most ANSWER_WAIT_S."""
    stub = quorum.controller_stub(quorum.wait_active().address)
    streams = []
    with ThreadPoolExecutor(max_workers=1) as reader:
        for broker in brokers:
            request = controller_pb2.BrokerSessionRequest(
                broker_id=broker.broker_id, broker_epoch=broker.broker_epoch
            )
            stream = stub.BrokerSession(request, timeout=STREAM_DEADLINE_S)
            streams.append(stream)
            try:
                opened = reader.submit(next, stream).result(timeout=ANSWER_WAIT_S)
            except FuturesTimeout:
                _cancel(streams)
                raise AssertionError(
                    f"broker {broker.broker_id}'s session stream was not answered within "
                    f"{ANSWER_WAIT_S} s ({len(streams) - 1} streams held)"
                ) from None
            assert opened.header.error_code == common_pb2.NONE, opened.header
    return streams


def _cancel(streams: list[Any]) -> None:
    for stream in streams:
        stream.cancel()


def test_a_controller_holds_a_session_per_broker_and_still_answers(tmp_path: Path) -> None:
    with running_quorum(tmp_path) as quorum:
        brokers = [StandInBroker(quorum, broker_id) for broker_id in range(1, BROKERS + 1)]
        for broker in brokers:
            broker.register()
        streams = _open_sessions(quorum, brokers)
        try:
            # Heartbeats of every broker are answered while all the streams are held.
            for broker in brokers:
                response = broker.heartbeat()
                assert response.header.error_code == common_pb2.NONE, response.header
        finally:
            _cancel(streams)


def test_sessions_beyond_the_limit_are_refused_and_a_freed_one_is_taken(tmp_path: Path) -> None:
    with running_quorum(tmp_path, extra_args=("--broker-sessions-max", "2")) as quorum:
        brokers = [StandInBroker(quorum, broker_id) for broker_id in (1, 2, 3)]
        for broker in brokers:
            broker.register()
        streams = _open_sessions(quorum, brokers[:2])
        try:
            stub = quorum.controller_stub(quorum.wait_active().address)
            third = controller_pb2.BrokerSessionRequest(
                broker_id=3, broker_epoch=brokers[2].broker_epoch
            )
            refused = next(stub.BrokerSession(third, timeout=STREAM_DEADLINE_S))
            assert refused.header.error_code == common_pb2.POLICY_VIOLATION
            assert "broker.sessions.max (2)" in refused.header.error_message
            assert brokers[2].heartbeat().header.error_code == common_pb2.NONE

            streams[0].cancel()  # broker 1's stream ends: its slot is free again
            wait_for(
                lambda: _session_answer(stub, third) == common_pb2.NONE,
                timeout_s=ANSWER_WAIT_S,
                what="broker 3's session taken once broker 1's ended",
            )
        finally:
            _cancel(streams)


def _session_answer(stub: Any, request: controller_pb2.BrokerSessionRequest) -> int:
    stream = stub.BrokerSession(request, timeout=STREAM_DEADLINE_S)
    try:
        code: int = next(stream).header.error_code
        return code
    finally:
        stream.cancel()
