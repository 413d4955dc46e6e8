"""A real broker process against three real controllers (issue 4 §1-2, before replication).

The broker registers and is unfenced; a topic created through the CLI gets its log directories;
records produced through raw gRPC with acks=1 and acks=-1 come back through Fetch in order with
their offsets; ListOffsets and Metadata answer; bad requests get Kafka's codes; a SIGTERM restart
keeps the records and fetches only new metadata; a broker cut off from the quorum stops serving
until contact returns; kill -9 gets the broker fenced.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pykraft.proto import broker_pb2, common_pb2
from pykraft.proto.record_batch import build_batch

from .cluster import batch_records, fetch_raw, make_broker, produce_raw
from .controllers import Quorum, run_cli, running_quorum
from .processes import BrokerProcess, wait_for

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 3


def _broker_state(quorum: Quorum, broker_id: int) -> str | None:
    result = run_cli(quorum, "cluster", "describe", "--output", "json")
    assert result.returncode == 0, result.stderr
    brokers = json.loads(result.stdout)["brokers"]
    return next((b["state"] for b in brokers if b["id"] == broker_id), None)


def _produce(
    broker: BrokerProcess, values: list[bytes], *, acks: int, partition: int = 0
) -> broker_pb2.ProducePartitionResult:
    return produce_raw(broker, TOPIC, partition, values, acks=acks, base_timestamp=1_000)


def _fetch(
    broker: BrokerProcess, offset: int, *, partition: int = 0, epoch: int = -1, wait_ms: int = 0
) -> broker_pb2.FetchPartitionResult:
    return fetch_raw(broker, TOPIC, partition, offset, epoch=epoch, wait_ms=wait_ms)


_records = batch_records


def _list_offset(broker: BrokerProcess, timestamp: int) -> int:
    request = broker_pb2.ListOffsetsRequest(
        replica_id=-1,
        topics=[
            broker_pb2.ListOffsetsTopic(
                topic=TOPIC,
                partitions=[broker_pb2.ListOffsetsPartition(partition=0, timestamp=timestamp)],
            )
        ],
    )
    response: broker_pb2.ListOffsetsResponse = broker.stub().ListOffsets(request, timeout=10)
    result = response.topics[0].partitions[0]
    assert result.error_code == common_pb2.NONE, result.error_message
    return result.offset


def _serving(broker: BrokerProcess) -> bool:
    return _fetch(broker, 0).error_code == common_pb2.NONE


def _image_offset(broker: BrokerProcess) -> int:
    return broker.stored_image().offset


def _bad_requests(broker: BrokerProcess) -> None:
    good = build_batch([(1, None, b"x")])
    cases = {
        ("missing", 0, 1, good): common_pb2.UNKNOWN_TOPIC_OR_PARTITION,
        (TOPIC, PARTITIONS, 1, good): common_pb2.UNKNOWN_TOPIC_OR_PARTITION,
        (TOPIC, 0, 2, good): common_pb2.INVALID_REQUIRED_ACKS,
        (TOPIC, 0, 1, good[:-1] + bytes([good[-1] ^ 0xFF])): common_pb2.CORRUPT_MESSAGE,
    }
    for (topic, partition, acks, records), code in cases.items():
        request = broker_pb2.ProduceRequest(
            acks=acks,
            timeout_ms=1000,
            topics=[
                broker_pb2.ProduceTopic(
                    topic=topic,
                    partitions=[broker_pb2.ProducePartition(partition=partition, records=records)],
                )
            ],
        )
        result = broker.stub().Produce(request, timeout=10).topics[0].partitions[0]
        assert result.error_code == code, (topic, partition, acks, result)
        assert result.error_message


def test_broker_serves_produce_fetch_and_restarts(tmp_path: Path) -> None:
    with running_quorum(tmp_path) as quorum:
        # A standby first: the broker must follow NOT_CONTROLLER to the active controller.
        active = quorum.wait_active()
        standbys = [c.address for c in quorum.controllers if c is not active]
        broker = make_broker(tmp_path, quorum, 1, bootstrap=",".join([*standbys, active.address]))
        broker.start()
        try:
            wait_for(lambda: _broker_state(quorum, 1) == "unfenced", timeout_s=30, what="unfenced")
            created = run_cli(
                quorum, "topics", "create", "--topic", TOPIC,
                "--partitions", str(PARTITIONS), "--replication-factor", "1",
            )  # fmt: skip
            assert created.returncode == 0, created.stderr
            for p in range(PARTITIONS):
                wait_for(
                    lambda p=p: (broker.data_dir / f"{TOPIC}-{p}").is_dir(),  # type: ignore[misc]
                    timeout_s=20,
                    what=f"log directory of partition {p}",
                )
            wait_for(lambda: _serving(broker), timeout_s=20, what="the broker leading")

            first = _produce(broker, [b"a0", b"a1", b"a2"], acks=1)
            second = _produce(broker, [b"b0", b"b1"], acks=-1)
            assert (first.error_code, first.base_offset) == (common_pb2.NONE, 0), first
            assert (second.error_code, second.base_offset) == (common_pb2.NONE, 3), second
            fetched = _fetch(broker, 0)
            assert fetched.high_watermark == 5
            records = _records(fetched.records)
            assert [(r.offset, r.value) for r in records] == list(
                enumerate([b"a0", b"a1", b"a2", b"b0", b"b1"])
            )
            assert [(r.offset, r.value) for r in _records(_fetch(broker, 3).records)] == [
                (3, b"b0"),
                (4, b"b1"),
            ]
            assert _fetch(broker, 99).error_code == common_pb2.OFFSET_OUT_OF_RANGE
            assert _fetch(broker, 0, epoch=99).error_code == common_pb2.UNKNOWN_LEADER_EPOCH
            assert (_list_offset(broker, -2), _list_offset(broker, -1)) == (0, 5)
            assert _list_offset(broker, 1_001) == 1

            metadata = broker.stub().Metadata(broker_pb2.MetadataRequest(), timeout=10)
            assert [b.id for b in metadata.brokers] == [1]
            (topic,) = metadata.topics
            assert topic.name == TOPIC and len(topic.partitions) == PARTITIONS
            assert all(p.leader_id == 1 and list(p.isr) == [1] for p in topic.partitions)
            _bad_requests(broker)

            # Restart: the records stay, the image on disk is where the fetch resumes.
            assert broker.stop() == 0
            offset_at_stop = _image_offset(broker)
            assert offset_at_stop > 0
            broker.start()
            wait_for(lambda: _serving(broker), timeout_s=30, what="the restarted broker leading")
            assert [r.value for r in _records(_fetch(broker, 0).records)][:5] == [
                b"a0", b"a1", b"a2", b"b0", b"b1",
            ]  # fmt: skip
            log_text = broker.log_path.read_text()
            assert "controlled shutdown done" in log_text
            assert f"metadata image on disk as of offset {offset_at_stop}" in log_text
            assert _image_offset(broker) >= offset_at_stop

            # Cut off from the quorum past its session timeout, it refuses; back once in touch.
            quorum.kill_all()
            wait_for(
                lambda: _fetch(broker, 0).error_code == common_pb2.NOT_LEADER_OR_FOLLOWER,
                timeout_s=10,
                what="the broker fencing itself",
            )
            quorum.start()
            wait_for(lambda: _serving(broker), timeout_s=40, what="the broker serving again")
        finally:
            broker.close()


def test_killed_broker_is_fenced_within_session_timeout(tmp_path: Path) -> None:
    with running_quorum(tmp_path) as quorum:
        broker = make_broker(tmp_path, quorum, 1, session_timeout_ms=3000)
        broker.start()
        try:
            wait_for(lambda: _broker_state(quorum, 1) == "unfenced", timeout_s=30, what="unfenced")
            broker.kill()
            killed_at = time.monotonic()
            wait_for(lambda: _broker_state(quorum, 1) == "fenced", timeout_s=20, what="fenced")
            # The controllers' session timeout (9 s) decides; the poll adds a little.
            assert time.monotonic() - killed_at < 15
        finally:
            broker.close()
