"""Fetch through the listener over a real socket, zero copy (records sent from the segment files
with sendfile) against the same listener reading the records into memory: the same bytes on
the wire for every version, pipelined, with sendfile unavailable too, and kio reads them."""

from __future__ import annotations

import asyncio
import datetime
import gc
import io
import os
import re
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer.fetch import FetchResponse as PyFetchResponse
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32

from pykraft.broker.kafka.apis import fetch
from pykraft.broker.kafka.codec import SIZE, decode_response, encode_request
from pykraft.broker.kafka.dispatch import Dispatcher
from pykraft.broker.kafka.entities import build
from pykraft.broker.kafka.server import KafkaListener
from tests.unit.broker.kafka.listener_socket import connect, read_frame

from ..replica_harness import Harness
from .data_path_calls import services
from .kafka_python_wire import fetch_request, record_values

VERSIONS = range(4, 13)


@pytest.fixture
def listeners(harness: Harness, tmp_path: Path) -> Iterator[tuple[KafkaListener, KafkaListener]]:
    """(zero copy, reading) listeners over one broker whose orders-0 holds 20 batches."""
    for number in range(20):
        harness.produce(0, [b"%d-%d" % (number, i) * 50 for i in range(number % 4 + 1)])
    kafka = services(harness.manager, tmp_path)
    started = []
    for zero_copy in (True, False):
        dispatcher = Dispatcher(fetch.APIS, zero_copy=zero_copy)
        started.append(KafkaListener("127.0.0.1", 0, dispatcher, kafka))
        started[-1].start()
    yield started[0], started[1]
    for listener in started:
        listener.stop()


def _fetch(correlation_id: int, version: int, offset: int, partition_bytes_max: int) -> bytes:
    types = load_payload_module(1, version, EntityType.request)
    partitions = tuple(
        types.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=partition_bytes_max)
        for p, o in ((0, offset), (1, 0), (2, 0), (0, offset + 7))
    )
    request = build(
        types.FetchRequest,
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=correlation_id % 2,
        topics=(types.FetchTopic(topic="orders", partitions=partitions),),
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=(),
        rack_id="",
    )
    return encode_request(correlation_id, request)


def _exchange(listener: KafkaListener, requests: list[bytes]) -> list[bytes]:
    """Sends every request before reading any answer (pipelined); the answer frames."""
    with connect(listener) as sock:
        sock.sendall(b"".join(requests))
        return [read_frame(sock) for _ in requests]


# A segment's file: its 20-digit base offset, ".log" (not any open file ending in .log, such as
# the file a test run's output is redirected to).
SEGMENT_FILE = re.compile(r"\d{20}\.log")


def _open_ranges() -> list[str]:
    """The segment files this process has open more than once (the log's own descriptor)."""
    paths = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:
            continue  # listdir's own descriptor
    logs = [path for path in paths if SEGMENT_FILE.fullmatch(os.path.basename(path))]
    return [path for path in set(logs) if logs.count(path) > 1]


def _requests() -> list[bytes]:
    return [
        _fetch(correlation_id, version, offset, partition_bytes_max)
        for correlation_id, (version, offset, partition_bytes_max) in enumerate(
            (v, o, b) for v in VERSIONS for o in (0, 5, 30) for b in (0, 700, 1 << 20)
        )
    ]


def _check_answers(answers: list[bytes], requests: list[bytes]) -> None:
    for correlation_id, (answer, request) in enumerate(zip(answers, requests, strict=True)):
        version = int.from_bytes(request[6:8])  # after the size and the API key
        schema = load_payload_module(1, version, EntityType.response).FetchResponse
        found_id, response = decode_response(answer, schema)
        assert found_id == correlation_id
        partitions = response.responses[0].partitions
        assert partitions[0].records and partitions[0].error_code == ErrorCode.none
        # Broker 1 follows orders-2: from v11 (KIP-392) an in-sync follower serves consumers.
        followed = ErrorCode.none if version >= 11 else ErrorCode.not_leader_or_follower
        assert partitions[2].error_code == followed


def test_zero_copy_answers_are_the_bytes_read_answers(
    listeners: tuple[KafkaListener, KafkaListener], monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[int] = []
    real_sendfile = os.sendfile

    def counting_sendfile(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        sent.append(count)
        return real_sendfile(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", counting_sendfile)
    requests = _requests()
    zero_copy = _exchange(listeners[0], requests)
    assert sent, "the records went through sendfile"
    deadline_s = time.monotonic() + 5  # the listener closes a range just after sending it
    while _open_ranges() and time.monotonic() < deadline_s:
        time.sleep(0.01)
    assert not _open_ranges(), "every range's descriptor is closed once sent"
    assert zero_copy == _exchange(listeners[1], requests)
    _check_answers(zero_copy, requests)


def test_without_sendfile_the_bytes_are_read_and_written(
    listeners: tuple[KafkaListener, KafkaListener], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_sendfile(*args: object, **kwargs: object) -> int:
        raise asyncio.SendfileNotAvailableError("not here")

    monkeypatch.setattr(asyncio.BaseEventLoop, "sendfile", no_sendfile)
    requests = _requests()[:12]
    assert _exchange(listeners[0], requests) == _exchange(listeners[1], requests)


def test_ranges_of_answers_never_sent_are_closed(
    listeners: tuple[KafkaListener, KafkaListener],
) -> None:
    with connect(listeners[0]) as sock:
        sock.sendall(b"".join(_requests()))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # The listener may still be reading and answering requests: none open for 0.3 s in a row.
    deadline_s, quiet_since_s = time.monotonic() + 5, time.monotonic()
    while time.monotonic() < deadline_s and time.monotonic() - quiet_since_s < 0.3:
        gc.collect()
        if _open_ranges():
            quiet_since_s = time.monotonic()
        time.sleep(0.01)
    assert not _open_ranges()


@pytest.mark.parametrize("version", [4, 11, 12])
def test_kafka_python_reads_the_records_sent_by_sendfile(
    listeners: tuple[KafkaListener, KafkaListener], version: int
) -> None:
    """kafka-python's codec (not kio's, which the byte comparison shares) and record parser."""
    request = fetch_request(version)
    flexible = version >= 12
    header = io.BytesIO()
    header_schema: Any = RequestHeaderV2 if flexible else RequestHeaderV1
    entity_writer(header_schema)(
        header,
        header_schema(
            request_api_key=i16(1),
            request_api_version=i16(version),
            correlation_id=i32(5),
            client_id="kafka-python",
        ),
    )
    payload = header.getvalue() + bytes(request.encode(version=version))
    (answer,) = _exchange(listeners[0], [SIZE.pack(len(payload)) + payload])
    # The response header: the correlation id (int32), in v1 (flexible) then no tagged fields.
    assert answer[:4] == i32(5).to_bytes(4, "big")
    body = answer[4 + (1 if flexible else 0) :]
    response = PyFetchResponse.decode(body, version=version)
    (partition, *_) = response.responses[0].partitions
    values = [value for _, value in record_values(partition.records)]
    expected = [b"%d-%d" % (n, i) * 50 for n in range(20) for i in range(n % 4 + 1)]
    assert (partition.error_code, values) == (0, expected)
