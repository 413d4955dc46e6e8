"""The CLI's JSON shapes (an interface) and its tables, on typed values."""

from __future__ import annotations

import json

import pytest

from pykraft.cli.formatting import (
    RecordFormat,
    cluster_json,
    cluster_table,
    configs_json,
    configs_table,
    format_record,
    format_table,
    offsets_json,
    offsets_lines,
    quorum_json,
    quorum_table,
    record_json,
    topic_json,
    topics_table,
)
from pykraft.cli.properties import from_properties
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
from pykraft.client.types import ConsumerRecord, ListOffsetsResult, TopicPartition
from pykraft.proto.record_batch import TimestampType

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
        "observers": list(QUORUM.observers),
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


def record(**changes: object) -> ConsumerRecord:
    base = ConsumerRecord(
        "t", 3, 42, 1700000000000, TimestampType.CREATE_TIME, b"k", b"v", (("h", b"1"),)
    )
    return base._replace(**changes)  # type: ignore[arg-type]


def utf8(data: bytes) -> str:
    return data.decode()


def test_record_format_defaults_are_kafkas() -> None:
    assert RecordFormat() == RecordFormat(
        print_timestamp=False,
        print_partition=False,
        print_offset=False,
        print_headers=False,
        print_key=False,
        print_value=True,
        key_separator="\t",
        line_separator="\n",
        headers_separator=",",
        null_literal="null",
    )
    assert format_record(record(), RecordFormat(), utf8) == "v\n"


def test_format_record_prints_columns_in_kafkas_order() -> None:
    every = RecordFormat(
        print_timestamp=True,
        print_partition=True,
        print_offset=True,
        print_headers=True,
        print_key=True,
        key_separator="|",
    )
    assert (
        format_record(record(), every, utf8)
        == "CreateTime:1700000000000|Partition:3|Offset:42|h:1|k|v\n"
    )
    appended = record(timestamp_type=TimestampType.LOG_APPEND_TIME, headers=())
    assert format_record(appended, every, utf8).startswith("LogAppendTime:1700000000000|")
    assert "|NO_HEADERS|" in format_record(appended, every, utf8)


def test_format_record_nulls_headers_and_empty_columns() -> None:
    nulls = record(key=None, value=None, headers=(("a", None), ("b", b"2")))
    fmt = RecordFormat(print_key=True, print_headers=True, headers_separator=";", null_literal="-")
    assert format_record(nulls, fmt, utf8) == "a:-;b:2\t-\t-\n"
    key_only = RecordFormat(print_key=True, print_value=False, line_separator="\r\n")
    assert format_record(record(), key_only, utf8) == "k\r\n"
    assert format_record(record(), RecordFormat(print_value=False), utf8) == ""


def test_record_json_has_every_field() -> None:
    encoded = record_json(record(key=None, headers=(("h", None),)), utf8)
    assert encoded == {
        "topic": "t",
        "partition": 3,
        "offset": 42,
        "timestamp": 1700000000000,
        "timestamp_type": "CreateTime",
        "key": None,
        "value": "v",
        "headers": [{"key": "h", "value": None}],
    }
    json.dumps(encoded)


def test_record_format_from_kafka_properties() -> None:
    fmt = from_properties(
        RecordFormat,
        {"print.key": " TRUE ", "print.value": "false", "key.separator": ":", "null.literal": ""},
        "formatter",
    )
    assert fmt == RecordFormat(
        print_key=True, print_value=False, key_separator=":", null_literal=""
    )
    with pytest.raises(ValueError, match=r"print\.key must be true or false, not 'yes'"):
        from_properties(RecordFormat, {"print.key": "yes"}, "formatter")
    with pytest.raises(
        ValueError, match=r"unknown formatter properties 'a', 'b'; known: headers\.separator, "
    ):
        from_properties(RecordFormat, {"b": "1", "a": "2", "print.key": "true"}, "formatter")


def test_offsets_print_like_kafka_get_offsets() -> None:
    results = {
        TopicPartition("t", 10): ListOffsetsResult(5, -1, 0),
        TopicPartition("t", 2): ListOffsetsResult(7, 100, 1),
        TopicPartition("a", 0): ListOffsetsResult(-1, -1, 0),
    }
    assert offsets_lines(results).splitlines() == ["t:2:7", "t:10:5"]
    assert offsets_json(results) == [
        {"topic": "a", "partition": 0, "offset": -1, "timestamp": -1, "leader_epoch": 0},
        {"topic": "t", "partition": 2, "offset": 7, "timestamp": 100, "leader_epoch": 1},
        {"topic": "t", "partition": 10, "offset": 5, "timestamp": -1, "leader_epoch": 0},
    ]
