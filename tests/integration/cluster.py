"""A whole cluster for integration tests: three controllers, three brokers and a topic with
every replica in its ISR (`running_cluster`), the steps it is built of (brokers made and started,
topics created), the partitions' registrations, and raw Produce and Fetch calls to a broker.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pykraft.metadata_log.image import PartitionRegistration
from pykraft.proto import broker_pb2, common_pb2
from pykraft.proto.record_batch import Record, build_batch, decode_batch, iter_batches
from tests.ports import free_port

from .controllers import Quorum, run_cli, running_quorum
from .processes import BrokerProcess, wait_for


def make_broker(
    tmp_path: Path,
    quorum: Quorum,
    node_id: int,
    *,
    heartbeat_interval_ms: int = 300,
    session_timeout_ms: int = 3000,
    bootstrap: str | None = None,
    host: str = "127.0.0.1",
) -> BrokerProcess:
    """A broker of `quorum` (not started), with short heartbeats so tests stay quick;
    `bootstrap` (default: every controller) is its controller.quorum.bootstrap.servers and
    `host` the address it listens on."""
    port = free_port()
    data_dir = tmp_path / f"broker-{node_id}"
    args = [
        "--node-id", str(node_id), "--listeners", f"{host}:{port}",
        "--log-dirs", str(data_dir), "--bootstrap-controllers", bootstrap or quorum.bootstrap,
        "--cluster-id", "test-cluster", "--rack", f"rack-{node_id}",
        "--heartbeat-interval-ms", str(heartbeat_interval_ms),
        "--session-timeout-ms", str(session_timeout_ms),
    ]  # fmt: skip
    log_path = tmp_path / f"broker-{node_id}.log"
    return BrokerProcess(
        node_id=node_id, port=port, data_dir=data_dir, log_path=log_path, args=args, host=host
    )


BROKER_IDS = (1, 2, 3)


def registrations(quorum: Quorum, topic: str) -> dict[int, PartitionRegistration]:
    """`topic`'s partitions as the active controller's image has them."""
    found = quorum.image().topics.get_by_name(topic)
    assert found is not None, f"topic {topic} is not in the image"
    return dict(found.partitions)


def full_isr(quorum: Quorum, topic: str, partitions: int) -> bool:
    """Every one of the `partitions` partitions has all three brokers in its ISR."""
    found = registrations(quorum, topic)
    return len(found) == partitions and all(
        sorted(r.isr) == list(BROKER_IDS) for r in found.values()
    )


def start_brokers(
    quorum: Quorum, brokers: dict[int, BrokerProcess], *, timeout_s: float = 30
) -> None:
    """Starts `brokers` and waits until the quorum's image has every one of them unfenced."""
    for broker in brokers.values():
        broker.start()
    wait_for(
        lambda: set(brokers) <= set(quorum.image().cluster.unfenced_broker_ids()),
        timeout_s=timeout_s,
        what="every broker unfenced",
    )


def create_topic(quorum: Quorum, topic: str, partitions: int, *topic_args: str) -> None:
    """`pykraft topics create` with replication factor 3 and `topic_args`, then waits until
    every replica of `topic` is in its ISR."""
    created = run_cli(
        quorum, "topics", "create", "--topic", topic, "--partitions", str(partitions),
        "--replication-factor", "3", *topic_args,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    wait_for(
        lambda: full_isr(quorum, topic, partitions),
        timeout_s=30,
        what=f"every replica of {topic} in its ISR",
    )


def wait_until_brokers_know(
    brokers: dict[int, BrokerProcess], topic: str, partitions: int, *, timeout_s: float = 30
) -> None:
    """Waits until every live broker's own metadata has `topic` with a leader for each of its
    `partitions` (the controller's image has it first: a request sent at once may find a
    broker that has not heard of it yet)."""

    def known(broker: BrokerProcess) -> bool:
        request = broker_pb2.MetadataRequest(topics=[topic])
        (found,) = broker.stub().Metadata(request, timeout=10).topics
        leaders = [p.leader_id for p in found.partitions if p.error_code == common_pb2.NONE]
        known = found.error_code == common_pb2.NONE and len(leaders) == partitions
        return known and min(leaders) >= 0

    wait_for(
        lambda: all(known(b) for b in brokers.values() if b.alive),
        timeout_s=timeout_s,
        what=f"every broker knowing {topic}",
    )


@contextmanager
def running_cluster(
    tmp_path: Path,
    *,
    topic: str,
    partitions: int,
    topic_args: tuple[str, ...] = ("--config", "min.insync.replicas=2"),
    controller_args: tuple[str, ...] = (),
    broker_args: tuple[str, ...] = (),
) -> Iterator[tuple[Quorum, dict[int, BrokerProcess]]]:
    """Three controllers, three brokers and `topic` (replication factor 3, `topic_args` passed to
    `topics create`) with every replica in its ISR; the brokers are closed on exit."""
    with running_quorum(tmp_path, extra_args=controller_args) as quorum:
        brokers = {i: make_broker(tmp_path, quorum, i) for i in BROKER_IDS}
        try:
            for broker in brokers.values():
                broker.args += list(broker_args)
            start_brokers(quorum, brokers)
            create_topic(quorum, topic, partitions, *topic_args)
            wait_until_brokers_know(brokers, topic, partitions)
            yield quorum, brokers
        finally:
            for broker in brokers.values():
                broker.close()


def produce_raw(
    broker: BrokerProcess,
    topic: str,
    partition: int,
    values: list[bytes],
    *,
    acks: int,
    base_timestamp: int = 0,
) -> broker_pb2.ProducePartitionResult:
    """One batch of `values` (timestamps base_timestamp, +1, ...) through a raw Produce call."""
    batch = build_batch([(base_timestamp + i, None, value) for i, value in enumerate(values)])
    request = broker_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=3000,
        topics=[
            broker_pb2.ProduceTopic(
                topic=topic,
                partitions=[broker_pb2.ProducePartition(partition=partition, records=batch)],
            )
        ],
    )
    response: broker_pb2.ProduceResponse = broker.stub().Produce(request, timeout=10)
    return response.topics[0].partitions[0]


def fetch_raw(
    broker: BrokerProcess,
    topic: str,
    partition: int,
    offset: int,
    *,
    epoch: int = -1,
    replica_id: int = -1,
    wait_ms: int = 0,
) -> broker_pb2.FetchPartitionResult:
    """A raw Fetch of one partition from `offset` (as a consumer unless `replica_id` is set)."""
    item = broker_pb2.FetchPartition(
        partition=partition,
        current_leader_epoch=epoch,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 22,
    )
    request = broker_pb2.FetchRequest(
        replica_id=replica_id,
        max_wait_ms=wait_ms,
        min_bytes=1,
        max_bytes=1 << 22,
        topics=[broker_pb2.FetchTopic(topic=topic, partitions=[item])],
    )
    response: broker_pb2.FetchResponse = broker.stub().Fetch(request, timeout=10)
    return response.topics[0].partitions[0]


def batch_records(data: bytes) -> list[Record]:
    """Every record of a concatenation of whole batches."""
    return [record for position, _ in iter_batches(data) for record in decode_batch(data, position)]
