"""A tiny in-memory BrokerService over real gRPC, for the producer's and consumer's unit tests.

`FakeCluster` holds the partition logs (lists of stored batches) and who leads each partition;
each `FakeBroker` serves Produce, Fetch, ListOffsets and Metadata from that shared state on its
own 127.0.0.1 port, answering NOT_LEADER_OR_FOLLOWER for partitions it does not lead and
FENCED_LEADER_EPOCH for a stale leader epoch. Tests script errors per partition
(`produce_errors`) and move leaders (`move_leader`).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import grpc

from pykraft.client.types import TopicPartition
from pykraft.proto import broker_pb2 as pb
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import (
    BatchHeader,
    build_batch,
    decode_batch,
    iter_batches,
    rewrite_offsets,
)

WAIT_S = 5.0  # how long tests wait for a condition before failing


class FakeCluster:
    def __init__(self, topics: dict[str, int], brokers: int = 1) -> None:
        self.lock = threading.Condition()
        self.partitions = {
            TopicPartition(t, p): 1 for t, count in topics.items() for p in range(count)
        }  # tp -> leader id
        self.epochs: dict[TopicPartition, int] = dict.fromkeys(self.partitions, 0)
        self.logs: dict[TopicPartition, list[bytearray]] = defaultdict(list)
        self.log_start: dict[TopicPartition, int] = defaultdict(int)
        self.produce_errors: dict[TopicPartition, list[int]] = defaultdict(list)
        self.requests: dict[tuple[int, str], int] = defaultdict(int)  # (broker, method) -> count
        self.fetch_errors: list[int] = []  # every error code a Fetch answered, in order
        self.brokers = [FakeBroker(self, node_id) for node_id in range(1, brokers + 1)]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def end_offset(self, tp: TopicPartition) -> int:
        batches = self.logs[tp]
        return BatchHeader.parse(batches[-1]).next_offset if batches else self.log_start[tp]

    def append(self, tp: TopicPartition, values: list[bytes], key: bytes | None = None) -> None:
        """Stores one batch of `values` directly, as if produced."""
        batch = build_batch((1000 + i, key, v) for i, v in enumerate(values))
        with self.lock:
            self._store(tp, batch)

    def _store(self, tp: TopicPartition, records: bytes) -> int:
        base = self.end_offset(tp)
        next_offset = base
        for position, header in iter_batches(records):
            batch = bytearray(records[position : position + header.size_bytes])
            rewrite_offsets(batch, 0, base_offset=next_offset, partition_leader_epoch=0)
            self.logs[tp].append(batch)
            next_offset = BatchHeader.parse(batch).next_offset
        self.lock.notify_all()
        return base

    def move_leader(self, tp: TopicPartition, leader_id: int) -> None:
        with self.lock:
            self.partitions[tp] = leader_id
            self.epochs[tp] += 1

    def values(self, tp: TopicPartition) -> list[bytes | None]:
        """Every stored record's value, in offset order."""
        with self.lock:
            return [r.value for batch in self.logs[tp] for r in decode_batch(batch)]

    def leader_error(self, node_id: int, tp: TopicPartition, epoch: int = -1) -> int:
        if tp not in self.partitions:
            return common_pb2.UNKNOWN_TOPIC_OR_PARTITION
        if self.partitions[tp] != node_id:
            return common_pb2.NOT_LEADER_OR_FOLLOWER
        if 0 <= epoch < self.epochs[tp]:
            return common_pb2.FENCED_LEADER_EPOCH
        return common_pb2.NONE


class FakeBroker:
    def __init__(self, cluster: FakeCluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.server = grpc.server(ThreadPoolExecutor(max_workers=4))
        methods: dict[str, tuple[Any, Callable[[Any], Any]]] = {
            "Produce": (pb.ProduceRequest, self.produce),
            "Fetch": (pb.FetchRequest, self.fetch),
            "ListOffsets": (pb.ListOffsetsRequest, self.list_offsets),
            "Metadata": (pb.MetadataRequest, self.metadata),
        }
        handlers = {
            name: grpc.unary_unary_rpc_method_handler(
                self._counted(name, handler),
                request_deserializer=request_type.FromString,
                response_serializer=lambda m: m.SerializeToString(),
            )
            for name, (request_type, handler) in methods.items()
        }
        self.server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("pykraft.BrokerService", handlers)]
        )
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"

    def _counted(self, name: str, handler: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
        def run(request: Any, context: Any) -> Any:
            with self.cluster.lock:
                self.cluster.requests[(self.node_id, name)] += 1
            return handler(request)

        return run

    def produce(self, request: pb.ProduceRequest) -> pb.ProduceResponse:
        cluster = self.cluster
        topics = []
        with cluster.lock:
            for topic in request.topics:
                results = []
                for p in topic.partitions:
                    tp = TopicPartition(topic.topic, p.partition)
                    code = cluster.leader_error(self.node_id, tp)
                    if code == common_pb2.NONE and cluster.produce_errors[tp]:
                        code = cluster.produce_errors[tp].pop(0)
                    base = cluster._store(tp, p.records) if code == common_pb2.NONE else -1
                    results.append(
                        pb.ProducePartitionResult(
                            partition=p.partition,
                            error_code=code,  # type: ignore[arg-type]
                            base_offset=base,
                            log_append_time_ms=-1,
                        )
                    )
                topics.append(pb.ProduceTopicResult(topic=topic.topic, partitions=results))
        return pb.ProduceResponse(topics=topics)

    def fetch(self, request: pb.FetchRequest) -> pb.FetchResponse:
        cluster = self.cluster
        with cluster.lock:
            response = self._fetch_once(request)
            if not _has_records(response) and request.max_wait_ms > 0:
                cluster.lock.wait(request.max_wait_ms / 1000)
                response = self._fetch_once(request)
        return response

    def _fetch_once(self, request: pb.FetchRequest) -> pb.FetchResponse:
        topics = []
        for topic in request.topics:
            results = []
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                code = self.cluster.leader_error(self.node_id, tp, p.current_leader_epoch)
                end = self.cluster.end_offset(tp) if code == common_pb2.NONE else -1
                if code == common_pb2.NONE and not (
                    self.cluster.log_start[tp] <= p.fetch_offset <= end
                ):
                    code = common_pb2.OFFSET_OUT_OF_RANGE
                records = b""
                if code != common_pb2.NONE:
                    self.cluster.fetch_errors.append(code)
                else:
                    records = self._read(tp, p.fetch_offset, p.partition_max_bytes)
                results.append(
                    pb.FetchPartitionResult(
                        partition=p.partition,
                        error_code=code,  # type: ignore[arg-type]
                        high_watermark=end,
                        records=records,
                    )
                )
            topics.append(pb.FetchTopicResult(topic=topic.topic, partitions=results))
        return pb.FetchResponse(topics=topics)

    def _read(self, tp: TopicPartition, offset: int, max_bytes: int) -> bytes:
        out = bytearray()
        for batch in self.cluster.logs[tp]:
            if BatchHeader.parse(batch).next_offset <= offset:
                continue
            if out and len(out) + len(batch) > max_bytes:
                break
            out += batch
        return bytes(out)

    def list_offsets(self, request: pb.ListOffsetsRequest) -> pb.ListOffsetsResponse:
        cluster = self.cluster
        topics = []
        with cluster.lock:
            for topic in request.topics:
                results = []
                for p in topic.partitions:
                    tp = TopicPartition(topic.topic, p.partition)
                    code = cluster.leader_error(self.node_id, tp)
                    offset = -1
                    if code == common_pb2.NONE:
                        early = p.timestamp == -2
                        offset = cluster.log_start[tp] if early else cluster.end_offset(tp)
                    results.append(
                        pb.ListOffsetsPartitionResult(
                            partition=p.partition,
                            error_code=code,  # type: ignore[arg-type]
                            timestamp=-1,
                            offset=offset,
                        )
                    )
                topics.append(pb.ListOffsetsTopicResult(topic=topic.topic, partitions=results))
        return pb.ListOffsetsResponse(topics=topics)

    def metadata(self, request: pb.MetadataRequest) -> pb.MetadataResponse:
        cluster = self.cluster
        with cluster.lock:
            names = sorted({tp.topic for tp in cluster.partitions})
            topics = []
            for name in request.topics or names:
                if name not in names:
                    code = common_pb2.UNKNOWN_TOPIC_OR_PARTITION
                    topics.append(pb.TopicMetadata(name=name, error_code=code))
                    continue
                partitions = [
                    pb.PartitionMetadata(
                        partition=tp.partition,
                        leader_id=leader,
                        leader_epoch=cluster.epochs[tp],
                        replicas=[leader],
                        isr=[leader],
                    )
                    for tp, leader in sorted(cluster.partitions.items())
                    if tp.topic == name
                ]
                topics.append(pb.TopicMetadata(name=name, partitions=partitions))
            brokers = [
                pb.BrokerEndpoint(id=b.node_id, host="127.0.0.1", port=b.port)
                for b in cluster.brokers
            ]
        return pb.MetadataResponse(cluster_id="fake", brokers=brokers, topics=topics)


def _has_records(response: pb.FetchResponse) -> bool:
    return any(p.records or p.error_code for t in response.topics for p in t.partitions)


@contextmanager
def running(topics: dict[str, int], brokers: int = 1) -> Iterator[FakeCluster]:
    cluster = FakeCluster(topics, brokers)
    for broker in cluster.brokers:
        broker.server.start()
    try:
        yield cluster
    finally:
        for broker in cluster.brokers:
            broker.server.stop(grace=None)
