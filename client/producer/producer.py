"""`Producer`: sends records to topics, batching per partition in a background thread.

    from pykraft.client import Producer

    with Producer(bootstrap_servers="127.0.0.1:9092", acks="all", linger_ms=5) as producer:
        future = producer.send("orders", b"one", key=b"customer-7")
        print(future.result(timeout=10).offset)

Configuration uses Kafka's producer config names with `_` for `.` and Kafka's defaults
(`config.ProducerConfig`). An unknown keyword raises TypeError naming it (Python's own check);
a bad value raises ValueError with a sentence.

Idempotence is on by default, as in Kafka: the producer takes a producer id from the cluster
and numbers its records per partition, so a retry after a lost answer is never written twice
and never reorders a partition. It needs acks="all", retries > 0 and at most 5 requests in
flight per connection (see `config` for how a conflict is treated).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from typing import Self

from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.clock import monotonic_ms
from pykraft.client.cluster_metadata import ClusterMetadata
from pykraft.client.errors import KafkaError, RequestTimedOutError
from pykraft.client.producer import open_batches
from pykraft.client.producer.accumulator import DeliveryCounts, RecordAccumulator
from pykraft.client.producer.config import INT32_MAX, ProducerConfig
from pykraft.client.producer.partitioner import DefaultPartitioner
from pykraft.client.producer.sender import Sender
from pykraft.client.routing import parse_bootstrap
from pykraft.client.transport import Backoff
from pykraft.proto import extensions

# `send`'s work, compiled unless disabled or not built (pykraft.proto.extensions). Read when a
# producer is made.
send_path_python = open_batches.SendPath
SendPath: type[open_batches.SendPath] = send_path_python
_compiled = extensions.load("pykraft.client.producer._open_batches")
if _compiled is not None:
    SendPath = _compiled.SendPath


class Producer:
    """Thread-safe: many threads may `send` at once; one background thread talks to brokers.

    `send(topic, value=None, key=None, partition=None, headers=None, timestamp_ms=None,
    on_delivery=None)` queues one record and returns its future (`open_batches.SendPath.send`
    says what it promises): an attribute of each producer, its send path's own method, compiled
    unless disabled, so no frame of ours runs around the per-record path."""

    def __init__(
        self,
        *,
        bootstrap_servers: str | Sequence[str],
        acks: str | int = "all",
        linger_ms: int = 5,
        batch_size: int = 16384,
        compression_type: str | None = None,
        retries: int = INT32_MAX,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30000,
        delivery_timeout_ms: int = 120000,
        max_in_flight_requests_per_connection: int = 5,
        enable_idempotence: bool | None = None,
        max_request_size: int = 1048576,
        buffer_memory: int = 33554432,
        max_block_ms: int = 60000,
        client_id: str = "",
        partitioner: DefaultPartitioner | None = None,
    ) -> None:
        """Kafka's producer configs with `_` for `.` (see `ProducerConfig`, which checks
        them); `partitioner` replaces Kafka's default (murmur2 of the key, sticky without)."""
        bootstrap = parse_bootstrap(bootstrap_servers)
        self._config = config = ProducerConfig(
            acks=acks,
            linger_ms=linger_ms,
            batch_size=batch_size,
            compression_type=compression_type,
            retries=retries,
            retry_backoff_ms=retry_backoff_ms,
            request_timeout_ms=request_timeout_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            max_in_flight_requests_per_connection=max_in_flight_requests_per_connection,
            enable_idempotence=enable_idempotence,
            max_request_size=max_request_size,
            buffer_memory=buffer_memory,
            max_block_ms=max_block_ms,
            client_id=client_id,
        )
        self.client_id = client_id
        self._partitioner = partitioner or DefaultPartitioner()
        self._pool = ConnectionPool(retry_backoff_ms=retry_backoff_ms)
        self._metadata = ClusterMetadata(
            bootstrap,
            self._pool,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        wakeup = threading.Event()
        self._accumulator = RecordAccumulator(
            batch_size=batch_size,
            linger_ms=linger_ms,
            buffer_memory=buffer_memory,
            compression=config.compression,
            wakeup=wakeup,
            max_request_size=max_request_size,
        )
        self._sender = Sender(self._accumulator, self._metadata, self._pool, config, wakeup)
        self._sender.start()
        self._send_path = SendPath(
            self._metadata,
            self._partitioner,
            self._accumulator.open_batches,
            max_block_ms=config.max_block_ms,
            wait_for_partition=self._wait_for_partition,
        )
        self.send = self._send_path.send  # see the class docstring
        self._close_lock = threading.Lock()

    def _wait_for_partition(self, topic: str, partition: int, count: int) -> int:
        """The topic's partition count once it covers `partition` (Kafka's waitOnMetadata: the
        topic may have grown since the producer learned it), asking for metadata again with
        backoff; ValueError after max_block_ms without it, or at once for a negative one."""
        deadline_ms = monotonic_ms() + self._config.max_block_ms
        backoff = Backoff(self._config.retry_backoff_ms)
        while partition >= 0:
            with contextlib.suppress(KafkaError):  # unreachable now: keep trying until the deadline
                self._metadata.refresh(monotonic_ms())
            count = self._metadata.partition_count(topic) or count
            left_ms = deadline_ms - monotonic_ms()
            if partition < count or left_ms <= 0:
                break
            time.sleep(min(backoff.next_ms(), left_ms) / 1000)
        if not 0 <= partition < count:
            raise ValueError(f"partition {partition} is not in [0, {count}) for topic {topic!r}")
        return count

    def delivery_counts(self) -> DeliveryCounts:
        """How many records were delivered and failed so far, and the last error; every record
        counts once its batch is done (after its future resolves), so after `flush` every record
        sent before it is counted. Cheaper than a callback per record."""
        return self._accumulator.delivery_counts()

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition numbers (blocks up to max_block_ms for metadata)."""
        return list(range(self._metadata.wait_for_topic(topic, self._config.max_block_ms)))

    def flush(self, timeout: float | None = None) -> None:
        """Sends everything queued now and waits until each such record succeeded or failed.

        Raises KafkaError (REQUEST_TIMED_OUT) if that takes longer than `timeout` seconds.
        """
        if not self._accumulator.flush(timeout):
            raise RequestTimedOutError(f"flush did not finish within {timeout} s")

    def close(self, timeout: float | None = None) -> None:
        """Delivers what is queued (waiting up to `timeout` seconds, forever if None), then
        fails whatever is left and closes the connections. Idempotent."""
        with self._close_lock:
            if self._send_path.closed:
                return
            self._send_path.closed = True
        self._sender.close(timeout)
        self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
