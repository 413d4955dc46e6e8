"""Benchmark of Fetch through the Kafka listener over a real socket (issue 14 §3): the same
partition read end to end by a consumer, once with the records sent from the segment files by
sendfile (zero copy) and once with them read into memory and encoded by kio.

Reports MB/s of record bytes per path and fetch size, and the copies each record byte takes on
the broker, counted from the code (COPIES below). The client reads each response into one
preallocated buffer (recv_into) and finds the next offset from the records' length (all
batches are the same size), so it costs both paths the same and little.

Run: `.venv/bin/python bench/kafka_fetch_sendfile.py [--mib 128]`.
"""

from __future__ import annotations

import argparse
import datetime
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic  # noqa: E402
from kio.schema.types import TopicName  # noqa: E402
from kio.static.primitive import i8, i32, i32Timedelta, i64  # noqa: E402

from pykraft.broker.kafka.apis import fetch  # noqa: E402
from pykraft.broker.kafka.codec import SIZE, encode_request  # noqa: E402
from pykraft.broker.kafka.dispatch import Dispatcher  # noqa: E402
from pykraft.broker.kafka.server import KafkaListener  # noqa: E402
from tests.unit.broker.kafka.data_path_calls import services  # noqa: E402
from tests.unit.broker.replica_harness import Harness  # noqa: E402

BATCH_RECORDS = 9_000  # 100-byte values: about 1 MiB a batch (max.message.bytes)
FETCH_BYTES = (1 << 20, 8 << 20)
# v11 is the newest version without tagged fields: the records' length (int32) follows this
# many bytes of framing for one partition of topic "orders" with no aborted transactions.
_RECORDS_SIZE_AT = 4 + 4 + 2 + 4 + 4 + 2 + 6 + 4 + 4 + 2 + 8 + 8 + 8 + 4 + 4
_RECORDS_SIZE = struct.Struct(">i")

COPIES = {
    "read + kio": (
        "4-5 in user space, then asyncio's buffer (1 or more), and 2 kernel crossings: pread "
        "(page cache -> bytes), the protobuf records field set and read back (2), kio's "
        "writer into a BytesIO (plus its growth) and getvalue (0-1: a resize may move it), "
        "send (bytes -> socket buffer); what send does not take is copied into the "
        "transport's bytearray, whose rest Python 3.11 shifts after each partial send"
    ),
    "sendfile": (
        "0 in user space, 1 in the kernel: sendfile (page cache -> socket buffer); the framing "
        "(under 100 bytes a partition) is written as for any response"
    ),
}


def _fetch_frame(correlation_id: int, offset: int, fetch_bytes: int) -> bytes:
    partition = FetchPartition(
        partition=i32(0),
        current_leader_epoch=i32(-1),
        fetch_offset=i64(offset),
        log_start_offset=i64(-1),
        partition_max_bytes=i32(fetch_bytes),
    )
    request = FetchRequest(
        replica_id=i32(-1),  # type: ignore[arg-type]
        max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0),
        max_bytes=i32(fetch_bytes),
        isolation_level=i8(0),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(FetchTopic(topic=TopicName("orders"), partitions=(partition,)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    return encode_request(correlation_id, request)


def _consume(port: int, end_offset: int, batch_bytes: int, fetch_bytes: int) -> int:
    """Fetches offsets 0..end_offset; the record bytes received."""
    buffer = memoryview(bytearray(fetch_bytes + (1 << 16)))
    offset = received = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        while offset < end_offset:
            sock.sendall(_fetch_frame(offset, offset, fetch_bytes))
            _receive(sock, buffer[: SIZE.size])
            (size,) = SIZE.unpack_from(buffer)
            _receive(sock, buffer[:size])
            (records_bytes,) = _RECORDS_SIZE.unpack_from(buffer, _RECORDS_SIZE_AT)
            assert records_bytes > 0 and records_bytes % batch_bytes == 0, records_bytes
            offset += records_bytes // batch_bytes * BATCH_RECORDS
            received += records_bytes
    return received


def _receive(sock: socket.socket, into: memoryview) -> None:
    while into:
        count = sock.recv_into(into)
        assert count, "connection closed"
        into = into[count:]


def run(total_bytes: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        harness = Harness(Path(tmp))
        listeners = []
        try:
            values = [b"v" * 100] * BATCH_RECORDS
            for _ in range(max(total_bytes // (BATCH_RECORDS * 100), 1)):
                harness.produce(0, values, timeout_ms=5_000)
            partition = harness.manager.leader("orders", 0, 0)
            end_offset = partition.high_watermark
            batch_bytes = len(partition.read(0, bytes_max=0).data)
            kafka = services(harness.manager, Path(tmp))
            for zero_copy in (True, False):
                dispatcher = Dispatcher(fetch.APIS, zero_copy=zero_copy)
                listener = KafkaListener("127.0.0.1", 0, dispatcher, kafka)
                listener.start()
                listeners.append((zero_copy, listener))
            for fetch_bytes in FETCH_BYTES:
                best_s = {zero_copy: float("inf") for zero_copy, _ in listeners}
                for _ in range(rounds):  # alternating, best of: the machine is shared
                    for zero_copy, listener in listeners:
                        started = time.perf_counter()
                        received = _consume(listener.port, end_offset, batch_bytes, fetch_bytes)
                        elapsed_s = time.perf_counter() - started
                        best_s[zero_copy] = min(best_s[zero_copy], elapsed_s)
                for zero_copy, elapsed_s in best_s.items():
                    name = "sendfile" if zero_copy else "read + kio"
                    print(
                        f"fetch {fetch_bytes >> 20} MiB/request  {name:<10} "
                        f"{received / elapsed_s / 1e6:8.1f} MB/s  ({received >> 20} MiB, "
                        f"best of {rounds})"
                    )
        finally:
            for _, listener in listeners:
                listener.stop()
            harness.manager.close()
    for name, copies in COPIES.items():
        print(f"copies per record byte, {name}: {copies}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=128, help="record bytes in the partition")
    parser.add_argument("--rounds", type=int, default=3, help="runs per path, best counts")
    arguments = parser.parse_args()
    run(arguments.mib << 20, arguments.rounds)


if __name__ == "__main__":
    main()
