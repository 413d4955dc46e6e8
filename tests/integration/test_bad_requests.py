"""Every bad request of issue 2 §3.7 answers with Kafka's error code and a clear message, and
changes nothing: the metadata image is the same before and after the whole barrage."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from pykraft.proto import admin_pb2, common_pb2, controller_pb2

from .controllers import StandInBroker, run_cli, running_quorum

pytestmark = pytest.mark.integration

CLI_CASES = [
    (["topics", "create", "--topic", "bad/name"], "INVALID_TOPIC_EXCEPTION"),
    (["topics", "create", "--topic", ".."], "INVALID_TOPIC_EXCEPTION"),
    (["topics", "create", "--topic", "x" * 250], "INVALID_TOPIC_EXCEPTION"),
    (["topics", "create", "--topic", "exists"], "TOPIC_ALREADY_EXISTS"),
    (["topics", "create", "--topic", "rf", "--replication-factor", "4"],
     "INVALID_REPLICATION_FACTOR"),
    (["topics", "create", "--topic", "c1", "--config", "no.such.key=1"], "INVALID_CONFIG"),
    (["topics", "create", "--topic", "c2", "--config", "retention.ms=soon"], "INVALID_CONFIG"),
    (["topics", "delete", "--topic", "missing"], "UNKNOWN_TOPIC_OR_PARTITION"),
    (["topics", "describe", "--topic", "missing"], "UNKNOWN_TOPIC_OR_PARTITION"),
    (["topics", "alter", "--topic", "exists", "--partitions", "1"], "INVALID_PARTITIONS"),
    (["topics", "alter", "--topic", "missing", "--partitions", "5"], "UNKNOWN_TOPIC_OR_PARTITION"),
    (["configs", "alter", "--entity-type", "topics", "--entity-name", "exists",
      "--add-config", "min.insync.replicas=0"], "INVALID_CONFIG"),
    (["configs", "alter", "--entity-type", "topics", "--entity-name", "missing",
      "--add-config", "retention.ms=1000"], "UNKNOWN_TOPIC_OR_PARTITION"),
    (["configs", "describe", "--entity-type", "topics", "--entity-name", "missing"],
     "UNKNOWN_TOPIC_OR_PARTITION"),
]  # fmt: skip


def test_bad_requests_get_their_error_and_change_nothing(tmp_path: Path) -> None:
    with running_quorum(tmp_path, extra_args=("--broker-session-timeout-ms", "60000")) as quorum:
        brokers = [StandInBroker(quorum, i) for i in (1, 2, 3)]
        for broker in brokers:
            broker.start()
        created = run_cli(quorum, "topics", "create", "--topic", "exists", "--partitions", "2")
        assert created.returncode == 0, created.stderr
        before = quorum.image()

        for args, code in CLI_CASES:
            result = run_cli(quorum, *args)
            assert result.returncode == 1, (args, result.stdout, result.stderr)
            assert code in result.stderr, (args, result.stderr)
            assert "Traceback" not in result.stderr

        admin = quorum.admin(quorum.wait_active().address)
        zero = admin.CreateTopics(
            admin_pb2.CreateTopicsRequest(
                topics=[admin_pb2.CreatableTopic(name="np", num_partitions=0, replication_factor=1)]
            ),
            timeout=5,
        )  # the CLI refuses --partitions 0 itself, so the server's check is asked directly
        assert [t.error_code for t in zero.topics] == [common_pb2.INVALID_PARTITIONS]
        assert zero.topics[0].error_message

        stub = quorum.controller_stub(quorum.wait_active().address)
        unknown = stub.BrokerHeartbeat(
            controller_pb2.BrokerHeartbeatRequest(broker_id=42, broker_epoch=1), timeout=5
        )
        assert unknown.header.error_code == common_pb2.BROKER_ID_NOT_REGISTERED
        stale = stub.BrokerHeartbeat(
            controller_pb2.BrokerHeartbeatRequest(
                broker_id=1, broker_epoch=brokers[0].broker_epoch - 1
            ),
            timeout=5,
        )
        assert stale.header.error_code == common_pb2.STALE_BROKER_EPOCH
        assert stale.header.error_message
        topic = before.topics.get_by_name("exists")
        assert topic is not None
        partition = topic.partitions[0]
        alter = stub.AlterPartition(
            controller_pb2.AlterPartitionRequest(
                broker_id=partition.leader,
                broker_epoch=brokers[partition.leader - 1].broker_epoch,
                topics=[controller_pb2.AlterPartitionTopic(
                    topic_id=str(topic.topic_id),
                    partitions=[controller_pb2.AlterPartitionItem(
                        partition=0, leader_epoch=partition.leader_epoch - 1,
                        partition_epoch=partition.partition_epoch,
                        new_isr_with_epochs=[controller_pb2.BrokerState(broker_id=partition.leader)],
                    )],
                )],
            ),
            timeout=5,
        )  # fmt: skip
        assert [p.error_code for p in alter.partitions] == [common_pb2.FENCED_LEADER_EPOCH]
        wrong_cluster = stub.RegisterBroker(
            controller_pb2.BrokerRegistrationRequest(
                broker_id=7, cluster_id="other", incarnation_id=str(uuid.uuid4()),
                listeners=[controller_pb2.Listener(name="PLAINTEXT", host="h", port=1)],
            ),
            timeout=5,
        )  # fmt: skip
        assert wrong_cluster.header.error_code == common_pb2.INCONSISTENT_CLUSTER_ID

        after = quorum.image()
        assert after == before
        for broker in brokers:
            broker.pause()
