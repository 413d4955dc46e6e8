"""The Kafka listener over real sockets in this process, with a broker's real services
(`unit_world`), fuzzed request by request and byte by byte (issue 14): pipelined requests of
every advertised API version are answered in order on a connection that stays usable; bad bytes
after a valid request get that request's answer, then their own answer or a clean close; and
once the connections are gone, the listener holds no more sockets, and no more threads than its
bounded pool."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from typing import Final

import pytest

from pykraft.broker.kafka.server import WORKERS_MAX, KafkaListener

from .frames import Case, Expect, check_case
from .listener_checks import assert_released, fuzz_bytes, fuzz_pipelined, open_sockets
from .unit_world import ADVERTISED, DISPATCHER, SERVED, VOCABULARY, unit_world
from .wire import Connection

PIPELINED_EXAMPLES: Final = 150
BYTE_EXAMPLES: Final = 300
SOCKETS_SLACK: Final = 0  # every connection the test opened it closed: both ends must go

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")


@pytest.fixture(scope="module")
def listener(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaListener]:
    with unit_world(tmp_path_factory.mktemp("kafka-listener")) as world:
        server = KafkaListener("127.0.0.1", 0, DISPATCHER, world.services)
        server.start()
        yield server
        server.stop()


def _open_sockets() -> int:
    return open_sockets(os.getpid())


@pytest.fixture(autouse=True)
def leaves_no_trace(listener: KafkaListener, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """After each test: the sockets let go, the threads within the pool's bound, and no error
    logged (a handler that raised closes its connection, which a bad-bytes case may accept as
    a close; its log line tells the two apart)."""
    sockets, threads = _open_sockets(), threading.active_count()
    yield
    assert_released(_open_sockets, sockets, SOCKETS_SLACK, "open sockets")
    assert_released(threading.active_count, threads, WORKERS_MAX, "threads")
    called = caplog.get_records("call")
    errors = [record.getMessage() for record in called if record.levelno >= logging.ERROR]
    assert not errors, errors


def test_pipelined_requests_are_answered_in_order_and_the_connection_serves_on(
    listener: KafkaListener,
) -> None:
    address = ("127.0.0.1", listener.port)
    fuzz_pipelined(address, ADVERTISED, VOCABULARY, PIPELINED_EXAMPLES, "in-process")


def test_bad_bytes_get_an_answer_or_a_clean_close(listener: KafkaListener) -> None:
    fuzz_bytes(("127.0.0.1", listener.port), SERVED, VOCABULARY, BYTE_EXAMPLES, "in-process")


def test_a_byte_flip_into_an_unknown_api_versions_version_is_checked_as_its_v0_answer(
    listener: KafkaListener,
) -> None:
    """Found by a long run (seed 203): the flip made ApiVersions v-32768, which the listener
    rightly answers in the v0 body; the check looked for a response class of that version."""
    case = Case(
        "flipped-byte", b"\x00\x00\x00\n\x00\x12\x80\x00\x00\x00\x00\x00\xff\xff", Expect.EITHER
    )
    with Connection(("127.0.0.1", listener.port)) as connection:
        check_case(connection, case)
