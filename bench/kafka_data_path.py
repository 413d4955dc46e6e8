"""Benchmark of the Kafka listener's data path without the network (issue 14 §3): Produce and
Fetch requests as the listener hands them over, decoded by kio, served by the handlers over a
real ReplicaManager and log in a temporary directory, and the response encoded by kio.

Per request size: MB/s and records/s of record bytes through each path, and how the time splits
between kio's decode, the handler and kio's encode. The client's side (encoding the request,
decoding the response) is not timed; the socket is K1's listener and not part of this run.

Run: `.venv/bin/python bench/kafka_data_path.py [--mib 64]`.
"""

from __future__ import annotations

import argparse
import datetime
import io
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kio.index import load_request_schema, load_response_schema  # noqa: E402
from kio.serial import entity_reader, entity_writer  # noqa: E402

from pykraft.broker.kafka.api import Api, RequestContext  # noqa: E402
from pykraft.broker.kafka.apis import fetch, produce  # noqa: E402
from pykraft.proto.record_batch import build_batch  # noqa: E402
from tests.unit.broker.kafka.data_path_calls import services  # noqa: E402
from tests.unit.broker.kafka.kio_wire import encode, request_types  # noqa: E402
from tests.unit.broker.replica_harness import Harness  # noqa: E402

PRODUCE_VERSION, FETCH_VERSION = 9, 12
VALUE_BYTES = 100
# About 11 KiB, 110 KiB and 990 KiB per request (Kafka's max.message.bytes is 1 MiB).
BATCH_RECORDS = (100, 1_000, 9_000)


class Stages:
    """Seconds spent in each stage of serving a request, summed over a run."""

    def __init__(self) -> None:
        self.decode_s = self.handle_s = self.encode_s = 0.0

    def serve(self, api: Api, context: RequestContext, body: bytes) -> bytes:
        started = time.perf_counter()
        request, _ = entity_reader(load_request_schema(api.key, context.api_version))(body, 0)
        decoded = time.perf_counter()
        response = api.handle(context, request)
        handled = time.perf_counter()
        out = io.BytesIO()
        entity_writer(load_response_schema(api.key, context.api_version))(out, response)
        body_out = out.getvalue()
        self.decode_s += decoded - started
        self.handle_s += handled - decoded
        self.encode_s += time.perf_counter() - handled
        return body_out

    def line(self, what: str, size_bytes: int, records: int) -> str:
        total_s = self.decode_s + self.handle_s + self.encode_s
        split = "/".join(
            f"{100 * s / total_s:.0f}" for s in (self.decode_s, self.handle_s, self.encode_s)
        )
        return (
            f"{what:<34} {size_bytes / total_s / 1e6:8.1f} MB/s {records / total_s:11,.0f} rec/s"
            f"   decode/handle/encode % {split}"
        )


def _produce_body(batch: bytes) -> bytes:
    types = request_types(0, PRODUCE_VERSION)
    data = types.PartitionProduceData(index=0, records=batch)
    request = types.ProduceRequest(
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(types.TopicProduceData(name="orders", partition_data=(data,)),),
    )
    return encode(types.ProduceRequest, request)


def _fetch_body(offset: int, bytes_max: int) -> bytes:
    types = request_types(1, FETCH_VERSION)
    item = types.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=bytes_max)
    request = types.FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=bytes_max,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(types.FetchTopic(topic="orders", partitions=(item,)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    return encode(types.FetchRequest, request)


def run(batch_records: int, total_bytes: int, report: Callable[[str], None]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        harness = Harness(Path(tmp))
        try:
            kafka = services(harness.manager, Path(tmp))
            batch = build_batch([(1_000, None, b"v" * VALUE_BYTES)] * batch_records)
            requests = max(total_bytes // len(batch), 1)
            stages = Stages()
            produce_context = RequestContext(kafka, PRODUCE_VERSION, "bench", "127.0.0.1")
            body = _produce_body(batch)
            for _ in range(requests):
                stages.serve(produce.APIS[0], produce_context, body)
            report(
                stages.line(
                    f"produce {len(batch):>9,} B/request",
                    requests * len(batch),
                    requests * batch_records,
                )
            )
            stages = Stages()
            fetch_context = RequestContext(kafka, FETCH_VERSION, "bench", "127.0.0.1")
            for request in range(requests):
                body = _fetch_body(request * batch_records, len(batch))
                answer = stages.serve(fetch.APIS[0], fetch_context, body)
                assert len(answer) > len(batch), "the fetch must bring the batch back"
            report(
                stages.line(
                    f"fetch   {len(batch):>9,} B/request",
                    requests * len(batch),
                    requests * batch_records,
                )
            )
        finally:
            harness.manager.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=64, help="record bytes per path and size")
    arguments = parser.parse_args()
    for batch_records in BATCH_RECORDS:
        run(batch_records, arguments.mib << 20, print)


if __name__ == "__main__":
    main()
