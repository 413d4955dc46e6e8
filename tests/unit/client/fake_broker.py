"""A tiny in-memory BrokerService over real gRPC, for the producer's and consumer's unit tests.

`FakeCluster` holds the partition logs (lists of stored batches) and who leads each partition;
each `FakeBroker` serves Produce, Fetch, ListOffsets and Metadata from that shared state on its
own 127.0.0.1 port, answering NOT_LEADER_OR_FOLLOWER for partitions it does not lead and
FENCED_LEADER_EPOCH for a stale leader epoch; Metadata names `data_port` as its data plane
listener (0 by default: none). Tests script errors per partition
(`produce_errors`, `fetch_script`), move leaders (`move_leader`), delete topics
(`delete_topic`), damage stored batches (`corrupt`) and cut a log as an unclean election does
(`truncate`, then `move_leader`). Produce checks idempotent producers' sequences as the real broker
does (`idempotent_store`). A partition may have an in-sync follower (`read_replicas`,
KIP-392): its leader names it to every consumer that sends a rack, with no records, and it
serves those consumers the same log.

The logs themselves are `fake_logs.FakeLogs`, which FakeCluster extends. Batches are stamped
with the partition's leader epoch when stored, and a Fetch that names a `last_fetched_epoch` is
checked against them as the real broker does (KIP-320): if the leader's log parts from the
fetcher's before the fetch offset, the answer is `diverging_epoch` and no records.

Fetch follows the real broker's limits: `partition_max_bytes` per partition and `max_bytes` in
all, except that the first batch found is returned whole; it long-polls up to `max_wait_ms`
(cut short when the cluster stops). `fetch_log` and `fetches_in_flight_max` let tests see what
consumers asked for and how many Fetches each broker served at once.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import grpc

from pykraft.client.types import TopicPartition
from pykraft.proto import broker_pb2 as pb
from pykraft.proto import common_pb2
from tests.unit.client.fake_grpc import unary_service
from tests.unit.client.fake_logs import FakeLogs

WAIT_S = 5.0  # how long tests wait for a condition before failing


class FakeCluster(FakeLogs):
    def __init__(self, topics: dict[str, int], brokers: int = 1) -> None:
        self.partitions = {
            TopicPartition(t, p): 1 for t, count in topics.items() for p in range(count)
        }  # tp -> leader id
        super().__init__(self.partitions)
        self.produce_errors: dict[TopicPartition, list[int]] = defaultdict(list)
        self.requests: dict[tuple[int, str], int] = defaultdict(int)  # (broker, method) -> count
        # gRPC statuses the next calls of a method end with, one per call, before the handler.
        self.rpc_aborts: dict[str, list[grpc.StatusCode]] = defaultdict(list)
        self.fetch_errors: list[int] = []  # every error code a Fetch answered, in order
        # Error codes the next Fetches of a partition answer, one per Fetch, before its data.
        self.fetch_script: dict[TopicPartition, list[int]] = defaultdict(list)
        # Every partition a Fetch asked for: (broker, tp, fetch_offset, request max_bytes).
        self.fetch_log: list[tuple[int, TopicPartition, int, int]] = []
        self.fetch_isolation_levels: set[int] = set()
        self.fetch_racks: list[str | None] = []  # every Fetch's rack_id (None: not sent)
        # tp -> the follower its leader names to consumers with a rack (always in sync here).
        self.read_replicas: dict[TopicPartition, int] = {}
        # Every diverging_epoch a Fetch answered: (tp, last_fetched_epoch, (epoch, end_offset)).
        self.diverging_answers: list[tuple[TopicPartition, int, tuple[int, int]]] = []
        self.fetches_in_flight: dict[int, int] = defaultdict(int)  # broker -> Fetches served now
        self.fetches_in_flight_max: dict[int, int] = defaultdict(int)
        self.stopped = False
        self.producer_ids_given = 0
        # How long a Produce answer waits after the append (acks=all's replication wait), and
        # the most Produce requests one broker held at once.
        self.produce_answer_delay_s = 0.0
        self.produces_in_flight_max = 0
        self._produces_in_flight = 0
        self.brokers = [FakeBroker(self, node_id) for node_id in range(1, brokers + 1)]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def delete_topic(self, topic: str) -> None:
        """The topic is gone: metadata and every request answer UNKNOWN_TOPIC_OR_PARTITION."""
        with self.lock:
            for tp in [tp for tp in self.partitions if tp.topic == topic]:
                del self.partitions[tp]
            self.lock.notify_all()

    def move_leader(self, tp: TopicPartition, leader_id: int) -> None:
        with self.lock:
            self.partitions[tp] = leader_id
            self.epochs[tp] += 1

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
            "InitProducerId": (pb.InitProducerIdRequest, self.init_producer_id),
        }
        counted = {name: (rt, self._counted(name, h)) for name, (rt, h) in methods.items()}
        self.server.add_generic_rpc_handlers([unary_service("pykraft.BrokerService", counted)])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"
        self.data_port = 0  # the data plane listener Metadata names (0: none, all gRPC)

    def _counted(self, name: str, handler: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
        def run(request: Any, context: Any) -> Any:
            with self.cluster.lock:
                self.cluster.requests[(self.node_id, name)] += 1
                aborts = self.cluster.rpc_aborts[name]
                abort = aborts.pop(0) if aborts else None
            if abort is not None:
                context.abort(abort, f"{name} ended with {abort.name} by the test")
            return handler(request)

        return run

    def init_producer_id(self, request: pb.InitProducerIdRequest) -> pb.InitProducerIdResponse:
        """A fresh producer id per call, epoch 0."""
        with self.cluster.lock:
            self.cluster.producer_ids_given += 1
            return pb.InitProducerIdResponse(
                producer_id=1000 + self.cluster.producer_ids_given, producer_epoch=0
            )

    def produce(self, request: pb.ProduceRequest) -> pb.ProduceResponse:
        cluster = self.cluster
        with cluster.lock:
            cluster._produces_in_flight += 1
            in_flight = cluster._produces_in_flight
            cluster.produces_in_flight_max = max(cluster.produces_in_flight_max, in_flight)
            response = self._produce_locked(request)
        time.sleep(cluster.produce_answer_delay_s)  # stands for acks=all's replication wait
        with cluster.lock:
            cluster._produces_in_flight -= 1
        return response

    def _produce_locked(self, request: pb.ProduceRequest) -> pb.ProduceResponse:
        """Holding the lock: appends what the request carries and builds the answer."""
        topics = [
            pb.ProduceTopicResult(
                topic=topic.topic,
                partitions=[self._produce_partition(topic.topic, p) for p in topic.partitions],
            )
            for topic in request.topics
        ]
        return pb.ProduceResponse(topics=topics)

    def _produce_partition(self, topic: str, p: pb.ProducePartition) -> pb.ProducePartitionResult:
        """Holding the lock: one partition's append: a scripted error, or the store's answer."""
        cluster = self.cluster
        tp = TopicPartition(topic, p.partition)
        code = cluster.leader_error(self.node_id, tp)
        if code == common_pb2.NONE and cluster.produce_errors[tp]:
            code = cluster.produce_errors[tp].pop(0)
        base = -1
        if code == common_pb2.NONE:
            code, base = cluster.idempotent_store(tp, p.records)
        return pb.ProducePartitionResult(
            partition=p.partition,
            error_code=code,  # type: ignore[arg-type]
            base_offset=base,
            log_append_time_ms=-1,
        )

    def fetch(self, request: pb.FetchRequest) -> pb.FetchResponse:
        cluster = self.cluster
        deadline = time.monotonic() + request.max_wait_ms / 1000
        with cluster.lock:
            cluster.fetches_in_flight[self.node_id] += 1
            cluster.fetches_in_flight_max[self.node_id] = max(
                cluster.fetches_in_flight_max[self.node_id], cluster.fetches_in_flight[self.node_id]
            )
            for topic in request.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.topic, p.partition)
                    cluster.fetch_log.append((self.node_id, tp, p.fetch_offset, request.max_bytes))
            cluster.fetch_isolation_levels.add(request.isolation_level)
            cluster.fetch_racks.append(request.rack_id if request.HasField("rack_id") else None)
            try:
                response = self._fetch_once(request)
                while not _has_records(response) and not cluster.stopped:
                    left_s = deadline - time.monotonic()
                    if left_s <= 0:
                        break
                    cluster.lock.wait(left_s)
                    response = self._fetch_once(request)
            finally:
                cluster.fetches_in_flight[self.node_id] -= 1
        return response

    def _fetch_once(self, request: pb.FetchRequest) -> pb.FetchResponse:
        topics = []
        size_bytes = 0
        for topic in request.topics:
            results = []
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                code = self._replica_error(request, tp, p.current_leader_epoch)
                end = self.cluster.end_offset(tp) if code == common_pb2.NONE else -1
                replica = self.cluster.read_replicas.get(tp)
                if (
                    code == common_pb2.NONE
                    and request.rack_id
                    and replica not in (None, self.node_id)
                ):
                    named = pb.FetchPartitionResult(
                        partition=p.partition, high_watermark=end, preferred_read_replica=replica
                    )
                    results.append(named)
                    continue
                if code == common_pb2.NONE and self.cluster.fetch_script[tp]:
                    code = self.cluster.fetch_script[tp].pop(0)
                diverging = None
                if code == common_pb2.NONE:
                    diverging = self.cluster.diverging_epoch(
                        tp, p.last_fetched_epoch, p.fetch_offset
                    )
                if diverging is not None:
                    self.cluster.diverging_answers.append((tp, p.last_fetched_epoch, diverging))
                    epoch, end_offset = diverging
                    results.append(
                        pb.FetchPartitionResult(
                            partition=p.partition,
                            high_watermark=end,
                            diverging_epoch=pb.EpochEndOffset(epoch=epoch, end_offset=end_offset),
                        )
                    )
                    continue
                if code == common_pb2.NONE and not (
                    self.cluster.log_start[tp] <= p.fetch_offset <= end
                ):
                    code = common_pb2.OFFSET_OUT_OF_RANGE
                records = b""
                if code != common_pb2.NONE:
                    self.cluster.fetch_errors.append(code)
                else:
                    budget = min(p.partition_max_bytes, request.max_bytes - size_bytes)
                    records = self.cluster.read(tp, p.fetch_offset, p.partition_max_bytes)
                    if len(records) > max(budget, 0) and size_bytes > 0:
                        records = b""  # over the request's budget: only the first may exceed
                    size_bytes += len(records)
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

    def _replica_error(self, request: pb.FetchRequest, tp: TopicPartition, epoch: int) -> int:
        """`leader_error`, except that a partition's read replica serves consumers that send a
        rack (an empty one too: they follow preferred read replicas)."""
        replica = self.cluster.read_replicas.get(tp)
        if (
            request.HasField("rack_id")
            and replica == self.node_id
            and tp in self.cluster.partitions
        ):
            return common_pb2.NONE
        return self.cluster.leader_error(self.node_id, tp, epoch)

    def list_offsets(self, request: pb.ListOffsetsRequest) -> pb.ListOffsetsResponse:
        cluster = self.cluster
        topics = []
        with cluster.lock:
            for topic in request.topics:
                results = []
                for p in topic.partitions:
                    tp = TopicPartition(topic.topic, p.partition)
                    code = cluster.leader_error(self.node_id, tp)
                    offset, timestamp = -1, -1
                    if code == common_pb2.NONE:
                        offset, timestamp = cluster.offset_for(tp, p.timestamp)
                    results.append(
                        pb.ListOffsetsPartitionResult(
                            partition=p.partition,
                            error_code=code,  # type: ignore[arg-type]
                            timestamp=timestamp,
                            offset=offset,
                        )
                    )
                topics.append(pb.ListOffsetsTopicResult(topic=topic.topic, partitions=results))
        return pb.ListOffsetsResponse(topics=topics)

    def _in_sync(self, tp: TopicPartition, leader: int) -> list[int]:
        replica = self.cluster.read_replicas.get(tp)
        return [leader] if replica in (None, leader) else [leader, replica]

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
                        replicas=self._in_sync(tp, leader),
                        isr=self._in_sync(tp, leader),
                    )
                    for tp, leader in sorted(cluster.partitions.items())
                    if tp.topic == name
                ]
                topics.append(pb.TopicMetadata(name=name, partitions=partitions))
            brokers = [
                pb.BrokerEndpoint(
                    id=b.node_id, host="127.0.0.1", port=b.port, data_port=b.data_port
                )
                for b in cluster.brokers
            ]
        return pb.MetadataResponse(cluster_id="fake", brokers=brokers, topics=topics)


def _has_records(response: pb.FetchResponse) -> bool:
    return any(
        p.records
        or p.error_code
        or p.HasField("diverging_epoch")
        or p.HasField("preferred_read_replica")
        for t in response.topics
        for p in t.partitions
    )


@contextmanager
def running(topics: dict[str, int], brokers: int = 1) -> Iterator[FakeCluster]:
    cluster = FakeCluster(topics, brokers)
    for broker in cluster.brokers:
        broker.server.start()
    try:
        yield cluster
    finally:
        with cluster.lock:
            cluster.stopped = True  # long polls return now, not at their max_wait_ms
            cluster.lock.notify_all()
        for broker in cluster.brokers:
            broker.server.stop(grace=None)


def wait_for(condition: Callable[[], object]) -> None:
    """Polls `condition` until it holds; fails the test after WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)
