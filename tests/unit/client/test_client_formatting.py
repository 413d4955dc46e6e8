"""The CLI's JSON shapes (an interface) and its tables, on typed values."""

from __future__ import annotations

import json

from pykraft.client.admin_types import (
    BrokerInfo,
    ClusterDescription,
    ConfigSource,
    ConfigValue,
    ControllerInfo,
    PartitionInfo,
    QuorumDescription,
    TopicDescription,
    VoterInfo,
)
from pykraft.client.formatting import (
    cluster_json,
    cluster_table,
    configs_json,
    configs_table,
    format_table,
    quorum_json,
    quorum_table,
    topic_json,
    topics_table,
)

OVERRIDE = ConfigValue("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG, False, False, "LIST")
DEFAULT = ConfigValue("604800000", ConfigSource.DEFAULT_CONFIG, True, False, "LONG")
TOPIC = TopicDescription(
    name="orders",
    topic_id="T1d",
    partitions=[
        PartitionInfo(0, 1, 4, [1, 2, 3], [1, 2, 3]),
        PartitionInfo(1, -1, 2, [2, 3, 1], [2]),
    ],
    configs={"cleanup.policy": OVERRIDE, "retention.ms": DEFAULT},
)
QUORUM = QuorumDescription(
    leader_id=2,
    leader_epoch=7,
    high_watermark=120,
    voters=[
        VoterInfo(1, "127.0.0.1:9001", 118, 2, "Follower"),
        VoterInfo(2, "127.0.0.1:9002", 120, 0, "Leader"),
    ],
    observers=[10],
)
CLUSTER = ClusterDescription(
    cluster_id="abc",
    controller_id=2,
    controllers=[ControllerInfo(1, "h:1", False), ControllerInfo(2, "h:2", True)],
    brokers=[BrokerInfo(10, "h:10", "", "unfenced", 5)],
)


def test_format_table_aligns_columns_without_trailing_spaces() -> None:
    table = format_table(["Id", "Name"], [[1, "alpha"], [10, "b"]])
    assert table.splitlines() == ["Id  Name", "1   alpha", "10  b"]


def test_topic_json_has_the_documented_keys_and_only_overrides() -> None:
    assert topic_json(TOPIC) == {
        "name": "orders",
        "topic_id": "T1d",
        "partitions": [
            {
                "partition": 0,
                "leader": 1,
                "leader_epoch": 4,
                "replicas": [1, 2, 3],
                "isr": [1, 2, 3],
            },
            {"partition": 1, "leader": -1, "leader_epoch": 2, "replicas": [2, 3, 1], "isr": [2]},
        ],
        "configs": {"cleanup.policy": "compact"},
    }


def test_topics_table_reads_like_kafka_topics_describe() -> None:
    lines = topics_table([TOPIC]).splitlines()
    assert lines[0].split() == [
        "Topic:", "orders", "TopicId:", "T1d", "PartitionCount:", "2",
        "ReplicationFactor:", "3", "Configs:", "cleanup.policy=compact",
    ]  # fmt: skip
    assert lines[1].split() == ["Partition", "Leader", "LeaderEpoch", "Replicas", "Isr"]
    assert lines[2].split() == ["0", "1", "4", "1,2,3", "1,2,3"]
    assert lines[3].split() == ["1", "none", "2", "2,3,1", "2"]
    assert lines[1].index("Leader ") == lines[3].index("none")


def test_quorum_json_and_table() -> None:
    voter = {"id": 1, "address": "127.0.0.1:9001", "log_end_offset": 118, "lag": 2}
    assert quorum_json(QUORUM) == {
        "leader_id": 2,
        "leader_epoch": 7,
        "high_watermark": 120,
        "voters": [
            {**voter, "status": "Follower"},
            {
                "id": 2,
                "address": "127.0.0.1:9002",
                "log_end_offset": 120,
                "lag": 0,
                "status": "Leader",
            },
        ],
    }
    lines = quorum_table(QUORUM).splitlines()
    assert lines[:6] == [
        "LeaderId:         2",
        "LeaderEpoch:      7",
        "HighWatermark:    120",
        "MaxFollowerLag:   2",
        "CurrentVoters:    [1,2]",
        "CurrentObservers: [10]",
    ]
    assert lines[7].split() == ["NodeId", "Address", "LogEndOffset", "Lag", "Status"]
    assert lines[8].split() == ["1", "127.0.0.1:9001", "118", "2", "Follower"]


def test_cluster_json_and_table() -> None:
    assert cluster_json(CLUSTER) == {
        "cluster_id": "abc",
        "controller_id": 2,
        "controllers": [
            {"id": 1, "address": "h:1", "is_active": False},
            {"id": 2, "address": "h:2", "is_active": True},
        ],
        "brokers": [{"id": 10, "address": "h:10", "rack": "", "state": "unfenced"}],
    }
    table = cluster_table(CLUSTER)
    assert "ClusterId:    abc" in table.splitlines()
    assert ["2", "h:2", "true"] in [line.split() for line in table.splitlines()]
    assert ["10", "h:10", "-", "unfenced", "5"] in [line.split() for line in table.splitlines()]


def test_configs_json_and_table() -> None:
    configs = {"retention.ms": DEFAULT, "cleanup.policy": OVERRIDE}
    encoded = configs_json(configs)
    assert list(encoded) == ["cleanup.policy", "retention.ms"]
    assert encoded["cleanup.policy"] == {
        "value": "compact",
        "source": "DYNAMIC_TOPIC_CONFIG",
        "is_default": False,
        "read_only": False,
        "type": "LIST",
    }
    json.dumps(encoded)  # plain JSON types only
    rows = [line.split() for line in configs_table(configs).splitlines()]
    assert rows[1] == [
        "cleanup.policy",
        "compact",
        "DYNAMIC_TOPIC_CONFIG",
        "false",
        "false",
        "LIST",
    ]
