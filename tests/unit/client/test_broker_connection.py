"""BrokerConnection.call_async over real gRPC against an in-process BrokerService: every call
is answered exactly once (a response, a header error or a connection error), calls run at once
side by side up to the connection's limit, and a run of calls one after the other starts no
thread per call (gRPC's `future` started a thread for each call made while none was in flight:
a tenth of a millisecond at the median and milliseconds at p99 on every produce and fetch)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from pykraft.client.broker_calls import CALLS_IN_FLIGHT_MAX
from pykraft.client.broker_connection import BrokerConnection
from pykraft.client.errors import KafkaConnectionError, KafkaError, NotLeaderOrFollowerError
from pykraft.proto import broker_pb2, common_pb2
from tests.unit.client.fake_grpc import started, unary_service
from tests.waiting import wait_until

WAIT_S = 10
SERVER_THREADS = "fake-broker"  # the in-process server's (started as it needs them)
Answer = broker_pb2.ListOffsetsResponse | KafkaError


class SlowBroker:
    """A BrokerService whose ListOffsets holds each call until `release` is set, counting the
    calls held at once, and answers NOT_LEADER_OR_FOLLOWER when `refuse` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.refuse = False
        self.held = 0
        self.held_most = 0
        self._lock = threading.Lock()

    def list_offsets(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self.held += 1
            self.held_most = max(self.held_most, self.held)
        try:
            assert self.release.wait(WAIT_S)
        finally:
            with self._lock:
                self.held -= 1
        response = broker_pb2.ListOffsetsResponse()
        if self.refuse:
            response.header.error_code = common_pb2.NOT_LEADER_OR_FOLLOWER
        return response


@pytest.fixture
def broker() -> Iterator[tuple[SlowBroker, str]]:
    fake = SlowBroker()
    server = grpc.server(
        futures.ThreadPoolExecutor(CALLS_IN_FLIGHT_MAX + 4, thread_name_prefix=SERVER_THREADS)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.add_generic_rpc_handlers(
        [
            unary_service(
                "pykraft.BrokerService",
                {"ListOffsets": (broker_pb2.ListOffsetsRequest, fake.list_offsets)},
            )
        ]
    )
    with started([server]):
        yield fake, f"127.0.0.1:{port}"


class Answers:
    """Collects call_async's answers, failing on a second answer to one call."""

    def __init__(self) -> None:
        self.by_call: dict[int, Answer] = {}
        self.threads: set[int] = set()
        self._lock = threading.Condition()

    def on_done(self, call: int) -> Any:
        def done(answer: Answer) -> None:
            with self._lock:
                assert call not in self.by_call, f"call {call} answered twice"
                self.by_call[call] = answer
                self.threads.add(threading.get_ident())
                self._lock.notify_all()

        return done

    def wait_for(self, count: int) -> None:
        with self._lock:
            assert self._lock.wait_for(lambda: len(self.by_call) >= count, WAIT_S), self.by_call


@pytest.fixture
def connected(
    broker: tuple[SlowBroker, str],
) -> Iterator[tuple[SlowBroker, BrokerConnection, Answers]]:
    """A connection to the slow broker and the answers to its calls; at the end the broker lets
    every held call go and the connection closes (again, for tests that closed it)."""
    fake, address = broker
    connection = BrokerConnection(address, retry_backoff_ms=10)
    try:
        yield fake, connection, Answers()
    finally:
        fake.release.set()
        connection.close()


def _call(
    connection: BrokerConnection, answers: Answers, calls: range, timeout_ms: int = 5000
) -> None:
    """Sends one ListOffsets per number in `calls`, answered into `answers` under its number."""
    for call in calls:
        connection.call_async(
            "ListOffsets",
            broker_pb2.ListOffsetsRequest(),
            broker_pb2.ListOffsetsResponse,
            timeout_ms,
            answers.on_done(call),
        )


def _limit_reached(
    connected: tuple[SlowBroker, BrokerConnection, Answers], calls: int
) -> tuple[SlowBroker, BrokerConnection, Answers]:
    """Sends `calls` calls (more than the limit) and waits until the broker holds the limit's
    worth: the rest wait on the connection's side. Returns `connected`."""
    fake, connection, answers = connected
    _call(connection, answers, range(calls))
    wait_until(lambda: fake.held >= CALLS_IN_FLIGHT_MAX, f"{CALLS_IN_FLIGHT_MAX} calls held")
    return connected


def test_calls_one_after_the_other_start_no_thread_per_call(
    connected: tuple[SlowBroker, BrokerConnection, Answers], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, connection, answers = connected
    fake.release.set()
    starts: list[str] = []
    real_start = threading.Thread.start

    def counted_start(thread: threading.Thread) -> None:
        if not thread.name.startswith(SERVER_THREADS):
            starts.append(thread.name)
        real_start(thread)

    _call(connection, answers, range(1))  # the connection's first call may start its thread
    answers.wait_for(1)
    monkeypatch.setattr(threading.Thread, "start", counted_start)
    for call in range(1, 21):
        _call(connection, answers, range(call, call + 1))
        answers.wait_for(call + 1)
    assert starts == []
    assert all(isinstance(a, broker_pb2.ListOffsetsResponse) for a in answers.by_call.values())


def test_calls_run_side_by_side_up_to_the_limit_and_each_is_answered_once(
    connected: tuple[SlowBroker, BrokerConnection, Answers],
) -> None:
    fake, _, answers = _limit_reached(connected, CALLS_IN_FLIGHT_MAX + 2)
    fake.refuse = True
    fake.release.set()
    answers.wait_for(CALLS_IN_FLIGHT_MAX + 2)
    assert fake.held_most == CALLS_IN_FLIGHT_MAX
    assert all(isinstance(a, NotLeaderOrFollowerError) for a in answers.by_call.values())


def test_a_call_the_broker_never_answers_in_time_fails_with_a_connection_error(
    connected: tuple[SlowBroker, BrokerConnection, Answers],
) -> None:
    _, connection, answers = connected
    _call(connection, answers, range(1), timeout_ms=100)
    answers.wait_for(1)
    assert isinstance(answers.by_call[0], KafkaConnectionError)


def test_calls_still_queued_when_the_connection_closes_are_answered_with_an_error(
    connected: tuple[SlowBroker, BrokerConnection, Answers],
) -> None:
    _, connection, answers = _limit_reached(connected, CALLS_IN_FLIGHT_MAX + 3)
    connection.close()
    answers.wait_for(CALLS_IN_FLIGHT_MAX + 3)
    assert all(isinstance(a, KafkaConnectionError) for a in answers.by_call.values())
