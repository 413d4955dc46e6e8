"""The Kafka listener over real sockets in this process, with a broker's real services
(`unit_world`), fuzzed request by request and byte by byte (issue 14): pipelined requests of
every advertised API version are answered in order on a connection that stays usable; bad bytes
after a valid request get that request's answer, then their own answer or a clean close; and
once the connections are gone, the listener holds no more descriptors or threads than its
bounded pool."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Final

import pytest

from pykraft.broker.kafka.server import WORKERS_MAX, KafkaListener

from .listener_checks import assert_released, fuzz_bytes, fuzz_pipelined
from .unit_world import ADVERTISED, DISPATCHER, SERVED, VOCABULARY, unit_world

PIPELINED_EXAMPLES: Final = 150
BYTE_EXAMPLES: Final = 300
FD_SLACK: Final = 8  # descriptors the logs may open meanwhile (segments, indexes)

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")


@pytest.fixture(scope="module")
def listener(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaListener]:
    with unit_world(tmp_path_factory.mktemp("kafka-listener")) as world:
        server = KafkaListener("127.0.0.1", 0, DISPATCHER, world.services)
        server.start()
        yield server
        server.stop()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_pipelined_requests_are_answered_in_order_and_the_connection_serves_on(
    listener: KafkaListener,
) -> None:
    fds, threads = _open_fds(), threading.active_count()
    fuzz_pipelined(
        ("127.0.0.1", listener.port), ADVERTISED, VOCABULARY, PIPELINED_EXAMPLES, "in-process"
    )
    assert_released(_open_fds, fds, FD_SLACK, "open descriptors")
    assert_released(threading.active_count, threads, WORKERS_MAX, "threads")


def test_bad_bytes_get_an_answer_or_a_clean_close(listener: KafkaListener) -> None:
    fds, threads = _open_fds(), threading.active_count()
    fuzz_bytes(("127.0.0.1", listener.port), SERVED, VOCABULARY, BYTE_EXAMPLES, "in-process")
    assert_released(_open_fds, fds, FD_SLACK, "open descriptors")
    assert_released(threading.active_count, threads, WORKERS_MAX, "threads")
