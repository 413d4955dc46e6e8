"""A broker holding more partitions than its process may open files (issue 18 §3.1).

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

from pykraft.proto import broker_pb2, common_pb2
from pykraft.proto.record_batch import build_batch

from .cluster import batch_records, make_broker, start_brokers, wait_until_brokers_know
from .controllers import run_cli, running_quorum
from .processes import BrokerProcess

pytestmark = pytest.mark.integration

TOPIC: Final = "many"
PARTITIONS: Final = 600
FILES_LIMIT: Final = 512
LOG_OPEN_FILES_MAX: Final = 64


def _produce_everywhere(broker: BrokerProcess) -> None:
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
        (p, common_pb2.NONE, 0) for p in range(PARTITIONS)
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
            start_brokers(quorum, {1: broker})
            created = run_cli(
                quorum, "topics", "create", "--topic", TOPIC,
                "--partitions", str(PARTITIONS), "--replication-factor", "1",
            )  # fmt: skip
            assert created.returncode == 0, created.stderr
            wait_until_brokers_know({1: broker}, TOPIC, PARTITIONS, timeout_s=60)
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
