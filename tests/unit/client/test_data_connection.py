"""DataConnection against a scripted data plane listener (`frame_server.py`) on 127.0.0.1: answers
matched by correlation id in any order, header errors as over gRPC, every failure of the
connection (closed, a bad frame, an answer that does not parse, a request timeout, close) fails
every pending call with KafkaConnectionError and the next call opens a fresh connection, and at
most CALLS_IN_FLIGHT_MAX calls are pending."""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from pykraft.client.broker_calls import CALLS_IN_FLIGHT_MAX
from pykraft.client.data_connection import DataConnection
from pykraft.client.errors import KafkaConnectionError, KafkaError, NotLeaderOrFollowerError
from pykraft.proto import broker_pb2, common_pb2
from pykraft.proto.data_plane import RESPONSE_BYTES_MAX, RESPONSE_HEADER, DataApi
from tests.unit.client.frame_server import FrameServer, Received
from tests.waiting import wait_until

TIMEOUT_MS = 10_000  # a call's timeout where the test does not want one to pass
Result = broker_pb2.ProduceResponse | KafkaError


class Results:
    """What each call_async's on_done got, by the call's name; each at most once."""

    def __init__(self) -> None:
        self.by_name: dict[str, Result] = {}
        self._lock = threading.Lock()

    def on_done(self, name: str) -> Callable[[Result], None]:
        def done(result: Result) -> None:
            with self._lock:
                assert name not in self.by_name, f"{name} answered twice"
                self.by_name[name] = result

        return done

    def wait_for(self, *names: str) -> list[Result]:
        wait_until(lambda: all(n in self.by_name for n in names), f"{names} answered")
        return [self.by_name[n] for n in names]


@pytest.fixture
def server() -> Iterator[FrameServer]:
    server = FrameServer()
    yield server
    server.close()


@pytest.fixture
def connection(server: FrameServer) -> Iterator[DataConnection]:
    connection = DataConnection(server.address)
    yield connection
    connection.close()


def produce(connection: DataConnection, name: str, results: Results, timeout_ms: int) -> None:
    """A Produce call_async whose request carries `name` as its topic."""
    request = broker_pb2.ProduceRequest(topics=[broker_pb2.ProduceTopic(topic=name)])
    connection.call_async(
        "Produce", request, broker_pb2.ProduceResponse, timeout_ms, results.on_done(name)
    )


def answer_named(server: FrameServer, request: Received) -> None:
    """Answers a Produce with its own topic name, so the test sees which answer went where."""
    name = broker_pb2.ProduceRequest.FromString(request.body).topics[0].topic
    server.respond(request, broker_pb2.ProduceResponse(topics=[{"topic": name}]))


def topic_of(result: Result) -> str:
    assert isinstance(result, broker_pb2.ProduceResponse), result
    return result.topics[0].topic


def assert_connection_errors(results: list[Result], reason: str) -> None:
    for result in results:
        assert isinstance(result, KafkaConnectionError), result
        assert result.retriable and reason in str(result), result


def test_answers_out_of_order_reach_their_calls(
    server: FrameServer, connection: DataConnection
) -> None:
    results = Results()
    blocking: list[broker_pb2.FetchResponse | KafkaError] = []

    def blocking_fetch() -> None:
        request = broker_pb2.FetchRequest(max_wait_ms=123)
        try:
            blocking.append(connection.call("Fetch", request, broker_pb2.FetchResponse, TIMEOUT_MS))
        except KafkaError as e:
            blocking.append(e)

    produce(connection, "a", results, TIMEOUT_MS)
    produce(connection, "b", results, TIMEOUT_MS)
    caller = threading.Thread(target=blocking_fetch)
    caller.start()
    received = [server.next_request() for _ in range(3)]
    fetch = next(r for r in received if r.api == DataApi.FETCH)
    assert broker_pb2.FetchRequest.FromString(fetch.body).max_wait_ms == 123
    assert len({r.correlation_id for r in received}) == 3
    for request in reversed(received):  # the last sent is answered first
        if request is fetch:
            server.respond(request, broker_pb2.FetchResponse(topics=[{"topic": "f"}]))
        else:
            answer_named(server, request)
    assert [topic_of(r) for r in results.wait_for("a", "b")] == ["a", "b"]
    caller.join(TIMEOUT_MS / 1000)
    assert [type(r) for r in blocking] == [broker_pb2.FetchResponse]
    assert isinstance(blocking[0], broker_pb2.FetchResponse) and blocking[0].topics[0].topic == "f"
    assert server.accepted == 1


def test_a_header_error_is_its_kafka_error(server: FrameServer, connection: DataConnection) -> None:
    header = common_pb2.ResponseHeader(
        error_code=common_pb2.NOT_LEADER_OR_FOLLOWER, error_message="moved away"
    )
    results = Results()
    produce(connection, "a", results, TIMEOUT_MS)
    server.respond(server.next_request(), broker_pb2.ProduceResponse(header=header))
    (error,) = results.wait_for("a")
    assert isinstance(error, NotLeaderOrFollowerError)
    assert str(error).endswith(f"{server.address}: moved away")
    threading.Thread(
        target=lambda: server.respond(
            server.next_request(), broker_pb2.ProduceResponse(header=header)
        )
    ).start()
    with pytest.raises(NotLeaderOrFollowerError, match="moved away"):
        connection.call(
            "Produce", broker_pb2.ProduceRequest(), broker_pb2.ProduceResponse, TIMEOUT_MS
        )
    assert server.accepted == 1  # an error answer keeps the connection


def test_a_closed_connection_fails_every_pending_call_and_the_next_call_reconnects(
    server: FrameServer, connection: DataConnection
) -> None:
    results = Results()
    produce(connection, "a", results, TIMEOUT_MS)
    produce(connection, "b", results, TIMEOUT_MS)
    first, _ = server.next_request(), server.next_request()
    server.drop(first)
    assert_connection_errors(results.wait_for("a", "b"), "connection lost")
    produce(connection, "c", results, TIMEOUT_MS)
    answer_named(server, server.next_request())
    assert topic_of(results.wait_for("c")[0]) == "c"
    assert server.accepted == 2


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (RESPONSE_HEADER.pack(RESPONSE_BYTES_MAX + 1, 0), "a response frame of"),
        (RESPONSE_HEADER.pack(4 + 3, 0) + b"\xff\xff\xff", "does not parse"),
        (RESPONSE_HEADER.pack(4, 999_999), "correlation id 999999"),
    ],
    ids=["too-large", "unparsable", "unknown-correlation-id"],
)
def test_a_bad_frame_fails_every_pending_call(
    server: FrameServer, connection: DataConnection, frame: bytes, reason: str
) -> None:
    results = Results()
    produce(connection, "a", results, TIMEOUT_MS)
    produce(connection, "b", results, TIMEOUT_MS)
    first = server.next_request()
    assert first.correlation_id == 0  # the frames above name the first call
    server.next_request()
    server.send_raw(first, frame)
    assert_connection_errors(results.wait_for("a", "b"), reason)
    wait_until(lambda: server.ended == 1, "the client closed the broken connection")


def test_a_request_timeout_fails_the_call_and_closes_the_connection(
    server: FrameServer, connection: DataConnection
) -> None:
    results = Results()
    produce(connection, "long", results, TIMEOUT_MS)
    server.next_request()
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError, match="no answer within 200 ms"):
        # Its deadline is earlier than the pending one's: the timer must wake for it.
        connection.call("Produce", broker_pb2.ProduceRequest(), broker_pb2.ProduceResponse, 200)
    assert 0.2 <= time.monotonic() - started < TIMEOUT_MS / 1000 / 2
    server.next_request()  # the timed-out call's request, never answered
    assert_connection_errors(results.wait_for("long"), "no answer within 200 ms")
    wait_until(lambda: server.ended == 1, "the client closed the timed-out connection")
    produce(connection, "next", results, TIMEOUT_MS)
    answer_named(server, server.next_request())
    assert topic_of(results.wait_for("next")[0]) == "next"


def test_close_fails_pending_calls_and_ends_the_threads(
    server: FrameServer, connection: DataConnection
) -> None:
    results = Results()
    produce(connection, "a", results, TIMEOUT_MS)
    server.next_request()
    connection.close()
    assert_connection_errors([results.by_name["a"]], "closed")  # answered before close returns
    assert not [t for t in threading.enumerate() if t.name.startswith("pykraft-data-")]
    produce(connection, "after", results, TIMEOUT_MS)
    assert_connection_errors([results.by_name["after"]], "closed")
    wait_until(lambda: server.ended == 1, "the server saw the connection closed")


def test_a_refused_connection_fails_the_call() -> None:
    with socket.socket() as bound:  # bound, never listening: connects are refused
        bound.bind(("127.0.0.1", 0))
        connection = DataConnection(f"127.0.0.1:{bound.getsockname()[1]}")
        try:
            with pytest.raises(KafkaConnectionError, match="connection lost: ConnectionRefused"):
                connection.call(
                    "Fetch", broker_pb2.FetchRequest(), broker_pb2.FetchResponse, TIMEOUT_MS
                )
        finally:
            connection.close()


def connecting_to(port: int) -> bool:
    """Whether a socket of this machine is in SYN_SENT to 127.0.0.1:`port` (/proc/net/tcp)."""
    with open("/proc/net/tcp", encoding="ascii") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return any(row[2] == f"0100007F:{port:04X}" and row[3] == "02" for row in rows)


def test_close_aborts_a_connect_in_progress() -> None:
    """A broker cut off by the network: the connect hangs (here: a listener whose accept queue
    is full drops the handshake); close must not wait for it, nor leave its threads behind."""
    with socket.create_server(("127.0.0.1", 0), backlog=0) as full:
        queued = socket.create_connection(full.getsockname(), timeout=1)  # fills the queue
        connection = DataConnection(f"127.0.0.1:{full.getsockname()[1]}")
        results = Results()
        try:
            produce(connection, "a", results, TIMEOUT_MS)
            port = full.getsockname()[1]
            wait_until(lambda: connecting_to(port), "the reader's connect under way")
            started = time.monotonic()
            connection.close()
            assert time.monotonic() - started < 0.5
            assert_connection_errors(results.wait_for("a"), "closed")
            assert not [t for t in threading.enumerate() if t.name.startswith("pykraft-data-")]
        finally:
            connection.close()
            queued.close()


def test_calls_beyond_the_in_flight_bound_wait_for_a_slot(
    server: FrameServer, connection: DataConnection
) -> None:
    results = Results()
    for i in range(CALLS_IN_FLIGHT_MAX):
        produce(connection, f"held-{i}", results, TIMEOUT_MS)
    held = [server.next_request() for _ in range(CALLS_IN_FLIGHT_MAX)]
    with pytest.raises(KafkaConnectionError, match="no answer within 100 ms"):
        connection.call("Produce", broker_pb2.ProduceRequest(), broker_pb2.ProduceResponse, 100)
    assert server.received.empty()  # the call beyond the bound was never sent
    waiting = threading.Thread(target=produce, args=(connection, "extra", results, TIMEOUT_MS))
    waiting.start()
    with pytest.raises(queue.Empty):  # held by the bound, not sent
        server.received.get(timeout=0.1)
    assert waiting.is_alive()
    answer_named(server, held[0])
    waiting.join(TIMEOUT_MS / 1000)
    extra = server.next_request()
    for request in [*held[1:], extra]:
        answer_named(server, request)
    names = [f"held-{i}" for i in range(CALLS_IN_FLIGHT_MAX)] + ["extra"]
    assert [topic_of(r) for r in results.wait_for(*names)] == names
    assert server.accepted == 1
