"""A follower's LeaderLink (broker/leader_link.py) to a real DataListener over broker 1's replica
manager: fetches answered on one connection, a failure is a LinkError that drops the connection,
and the next fetch connects again."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from pykraft.broker.controller_channel import monotonic_ms
from pykraft.broker.data_listener import DataHandlers, DataListener
from pykraft.broker.leader_link import LeaderLink, LinkError
from pykraft.proto import broker_pb2

from .replica_harness import Harness, record_values, wall_clock_ms


def follower_fetch(offset: int, *, wait_ms: int = 0) -> broker_pb2.FetchRequest:
    request = broker_pb2.FetchRequest(replica_id=2, max_wait_ms=wait_ms, min_bytes=1)
    request.topics.add(topic="orders").partitions.add(
        partition=1, fetch_offset=offset, current_leader_epoch=-1, last_fetched_epoch=-1,
        partition_max_bytes=1 << 20,
    )  # fmt: skip
    return request


def serving(harness: Harness, port: int = 0) -> DataListener:
    handlers = DataHandlers(harness.manager, monotonic_ms, wall_clock_ms, lambda request: False)
    listener = DataListener("127.0.0.1", port, handlers)
    listener.start()
    return listener


def test_a_follower_fetches_over_one_connection_and_reconnects_after_a_failure(
    harness: Harness,
) -> None:
    harness.produce(1, [b"a", b"b"])
    listener = serving(harness)
    link = LeaderLink(f"127.0.0.1:{listener.port}")
    try:
        answer = link.fetch(follower_fetch(0), timeout_s=5).topics[0].partitions[0]
        assert record_values(answer.records) == [(0, b"a"), (1, b"b")]
        port = listener.port
        listener.stop()
        with pytest.raises(LinkError):
            link.fetch(follower_fetch(2), timeout_s=5)
        listener = serving(harness, port)  # the leader back on the same address
        answer = link.fetch(follower_fetch(2), timeout_s=5).topics[0].partitions[0]
        assert answer.high_watermark == 2  # the follower's fetch of 2 moved the mark
    finally:
        link.close()
        listener.stop()


def _fetching(link: LeaderLink, *, timeout_s: float) -> tuple[threading.Thread, list[LinkError]]:
    """A fetch from offset 0 started on a thread of its own, and the LinkError it ends with."""
    failed: list[LinkError] = []

    def fetch() -> None:
        try:
            link.fetch(follower_fetch(0), timeout_s=timeout_s)
        except LinkError as error:
            failed.append(error)

    thread = threading.Thread(target=fetch)
    thread.start()
    return thread, failed


def test_a_fetch_not_answered_in_time_fails_and_close_ends_one_in_flight(harness: Harness) -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    link = LeaderLink(f"127.0.0.1:{silent.getsockname()[1]}")
    try:
        with pytest.raises(LinkError, match="timed out"):
            link.fetch(follower_fetch(0), timeout_s=0.2)
        thread, failed = _fetching(link, timeout_s=30)
        silent.settimeout(10)
        dropped, connected = (
            silent.accept()[0],
            silent.accept()[0],
        )  # the timed out one's, this one's
        link.close()
        thread.join(10)
        assert not thread.is_alive() and len(failed) == 1
        dropped.close()
        connected.close()
    finally:
        link.close()
        silent.close()


def test_close_does_not_wait_for_a_connect_in_progress(harness: Harness) -> None:
    """A leader cut off by the network: the fetcher's connect hangs (here: a listener whose
    accept queue is full drops the handshake), and `FetcherThread.stop` must not wait it out."""
    full = socket.create_server(("127.0.0.1", 0), backlog=0)
    queued = [socket.create_connection(full.getsockname(), timeout=1)]  # fills the queue
    link = LeaderLink(f"127.0.0.1:{full.getsockname()[1]}")
    try:
        thread, failed = _fetching(link, timeout_s=20)
        thread.join(0.5)
        assert thread.is_alive(), "the connect should hang"
        started = time.monotonic()
        link.close()
        assert time.monotonic() - started < 1
        thread.join(30)
        assert len(failed) == 1
    finally:
        link.close()
        for sock in queued:
            sock.close()
        full.close()
