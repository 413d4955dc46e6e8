"""A broker holding more partitions than its process may open files (issue 18 §3.1), and the
checkpoint files of a broker with many partitions across restarts (§1.2).

The broker runs under `prlimit --nofile=512:512` (so raising its soft limit gains nothing) with
`log.open.files.max` 64, and leads 600 partitions. Three descriptors per replica (`.log`,
`.index`, `.timeindex`, the scheme before the bounded cache) would need 1,800; even one per
replica would need 600. It takes a record in every partition, restarts (controlled shutdown,
then the logs reopened from disk) and serves every record back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from pykraft.broker.log import TopicPartition
from pykraft.broker.log.checkpoints import (
    HIGH_WATERMARK_FILE,
    RECOVERY_POINT_FILE,
    OffsetCheckpointFile,
)
from pykraft.broker.log.dir_checkpoints import OFFSET_CHECKPOINT_FILES
from pykraft.proto import broker_pb2, common_pb2
from pykraft.proto.record_batch import build_batch

from .cluster import batch_records, make_broker, start_brokers, wait_until_brokers_know
from .controllers import Quorum, run_cli, running_quorum
from .processes import BrokerProcess

pytestmark = pytest.mark.integration

TOPIC: Final = "many"
PARTITIONS: Final = 600
FILES_LIMIT: Final = 512
LOG_OPEN_FILES_MAX: Final = 64


def _start_with_topic(quorum: Quorum, broker: BrokerProcess) -> None:
    """Starts the broker and creates TOPIC on it (replication factor 1)."""
    start_brokers(quorum, {1: broker})
    created = run_cli(
        quorum, "topics", "create", "--topic", TOPIC,
        "--partitions", str(PARTITIONS), "--replication-factor", "1",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    wait_until_brokers_know({1: broker}, TOPIC, PARTITIONS, timeout_s=60)


def _produce_everywhere(broker: BrokerProcess, *, base_offset: int = 0) -> None:
    partitions = [
        broker_pb2.ProducePartition(partition=p, records=build_batch([(0, None, b"value-%d" % p)]))
        for p in range(PARTITIONS)
    ]
    request = broker_pb2.ProduceRequest(
        acks=1,
        timeout_ms=10_000,
        topics=[broker_pb2.ProduceTopic(topic=TOPIC, partitions=partitions)],
    )
    response: broker_pb2.ProduceResponse = broker.stub().Produce(request, timeout=60)
    results = response.topics[0].partitions
    assert [(r.partition, r.error_code, r.base_offset) for r in results] == [
        (p, common_pb2.NONE, base_offset) for p in range(PARTITIONS)
    ]


def _read_everywhere(broker: BrokerProcess) -> dict[int, list[bytes | None]]:
    """Every partition's records, read from offset 0 in one Fetch."""
    items = [
        broker_pb2.FetchPartition(
            partition=p,
            current_leader_epoch=-1,
            fetch_offset=0,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=1024,
        )
        for p in range(PARTITIONS)
    ]
    request = broker_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 22,
        topics=[broker_pb2.FetchTopic(topic=TOPIC, partitions=items)],
    )
    response: broker_pb2.FetchResponse = broker.stub().Fetch(request, timeout=60)
    found = {}
    for result in response.topics[0].partitions:
        assert result.error_code == common_pb2.NONE, (result.partition, result.error_code)
        found[result.partition] = [record.value for record in batch_records(result.records)]
    return found


def test_a_broker_serves_more_partitions_than_it_may_open_files_across_a_restart(
    tmp_path: Path,
) -> None:
    with running_quorum(tmp_path, size=1) as quorum:
        broker = make_broker(tmp_path, quorum, 1)
        broker.launcher = ("prlimit", f"--nofile={FILES_LIMIT}:{FILES_LIMIT}", "--")
        broker.args += ["--log-open-files-max", str(LOG_OPEN_FILES_MAX)]
        try:
            _start_with_topic(quorum, broker)
            _produce_everywhere(broker)
            expected = {p: [b"value-%d" % p] for p in range(PARTITIONS)}
            assert _read_everywhere(broker) == expected

            assert broker.stop(timeout_s=30) == 0
            start_brokers(quorum, {1: broker}, timeout_s=60)
            wait_until_brokers_know({1: broker}, TOPIC, PARTITIONS, timeout_s=60)
            assert _read_everywhere(broker) == expected
            assert broker.alive and b"Too many open files" not in broker.log_path.read_bytes()
        finally:
            broker.close()


def _offset_checkpoints(log_dir: Path) -> dict[str, dict[TopicPartition, int]]:
    return {name: OffsetCheckpointFile(log_dir / name).read() for name in OFFSET_CHECKPOINT_FILES}


def _to_old_layout(log_dir: Path) -> None:
    """Rewrites the log directory's checkpoint files as the per-partition files of data
    directories written before there was one file per log directory."""
    for name, offsets in _offset_checkpoints(log_dir).items():
        for key, offset in offsets.items():
            OffsetCheckpointFile(log_dir / key.directory_name / name).write({key: offset})
        (log_dir / name).unlink()


def test_restarts_keep_one_checkpoint_file_per_log_directory_and_read_the_old_layout(
    tmp_path: Path,
) -> None:
    """A controlled shutdown leaves one recovery-point, log-start and high-watermark file in the
    log directory, with every partition's entry; a data directory of the old per-partition
    layout starts and is moved to it; after kill -9 every acknowledged record is still there."""
    with running_quorum(tmp_path, size=1) as quorum:
        broker = make_broker(tmp_path, quorum, 1)
        try:
            _start_with_topic(quorum, broker)
            _produce_everywhere(broker)
            assert broker.stop(timeout_s=30) == 0
            stored = _offset_checkpoints(broker.data_dir)
            every = {TopicPartition(TOPIC, p): 1 for p in range(PARTITIONS)}
            assert stored[RECOVERY_POINT_FILE] == stored[HIGH_WATERMARK_FILE] == every
            assert not list(broker.data_dir.glob(f"*/{RECOVERY_POINT_FILE}"))

            _to_old_layout(broker.data_dir)
            start_brokers(quorum, {1: broker}, timeout_s=60)
            wait_until_brokers_know({1: broker}, TOPIC, PARTITIONS, timeout_s=60)
            expected = {p: [b"value-%d" % p] for p in range(PARTITIONS)}
            assert _read_everywhere(broker) == expected
            assert broker.stop(timeout_s=30) == 0
            assert _offset_checkpoints(broker.data_dir)[HIGH_WATERMARK_FILE] == every
            assert not list(broker.data_dir.glob(f"*/{HIGH_WATERMARK_FILE}")), "moved in"

            start_brokers(quorum, {1: broker}, timeout_s=60)
            wait_until_brokers_know({1: broker}, TOPIC, PARTITIONS, timeout_s=60)
            _produce_everywhere(broker, base_offset=1)
            broker.kill()
            start_brokers(quorum, {1: broker}, timeout_s=60)
            wait_until_brokers_know({1: broker}, TOPIC, PARTITIONS, timeout_s=60)
            assert _read_everywhere(broker) == {
                p: [*values, *values] for p, values in expected.items()
            }
        finally:
            broker.close()
