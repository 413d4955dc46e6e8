"""`pykraft offsets` (kafka-get-offsets) against in-process brokers over real gRPC
(`fake_offsets_cluster`): its lines, its JSON, its errors and how it reads --time and
--partitions."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result

from pykraft.cli.main import cli
from pykraft.cli.offsets import parse_partition_ids, parse_time
from pykraft.client.types import TopicPartition
from tests.unit.client.fake_offsets_cluster import running

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"PYKRAFT_BOOTSTRAP": ""})


def test_offsets_prints_kafka_get_offsets_lines() -> None:
    with running({T0: 1, T1: 2, U0: 1}) as state:
        state.timestamps[T0] = [10, 20]
        state.timestamps[T1] = [30]
        bootstrap = ["--bootstrap-server", state.nodes[1].address]
        latest = run("offsets", "--topic", "t", *bootstrap)
        assert latest.exit_code == 0, latest.output
        assert latest.stdout.splitlines() == ["t:0:2", "t:1:1"]
        every = run("offsets", "--time", "-2", *bootstrap)
        assert every.stdout.splitlines() == ["t:0:0", "t:1:0", "u:0:0"]
        by_time = run("offsets", "--topic", "t", "--time", "15", *bootstrap)
        assert by_time.stdout.splitlines() == ["t:0:1", "t:1:0"]
        none_yet = run("offsets", "--topic", "t", "--time", "25", "--partitions", "0", *bootstrap)
        assert none_yet.exit_code == 0 and none_yet.stdout == ""  # no record that late
        regex = run("offsets", "--topic", "[tu]", "--partitions", "0", *bootstrap)
        assert regex.stdout.splitlines() == ["t:0:2", "u:0:0"]


def test_offsets_json_lists_every_partition_asked() -> None:
    with running({T0: 1}) as state:
        state.timestamps[T0] = [10]
        result = run(
            "offsets", "--topic", "t", "--time", "99", "--output", "json",
            "--bootstrap-server", state.nodes[0].address,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == [
            {"topic": "t", "partition": 0, "offset": -1, "timestamp": -1, "leader_epoch": 0}
        ]


def test_offsets_errors_are_one_line_with_the_kafka_code() -> None:
    with running({T0: 1}) as state:
        bootstrap = ["--bootstrap-server", state.nodes[0].address]
        unknown = run("offsets", "--topic", "nope", *bootstrap)
        assert unknown.exit_code == 1
        assert unknown.stderr == "Error: UNKNOWN_TOPIC_OR_PARTITION: Unknown topic 'nope'.\n"
        unmatched = run("offsets", "--topic", "x.*", *bootstrap)
        assert unmatched.exit_code == 1
        assert unmatched.stderr.startswith("Error: UNKNOWN_TOPIC_OR_PARTITION: no topic-partition")
        for args, message in [
            (["--time", "max-timestamp"], "malformed time 'max-timestamp'"),
            (["--time", "-3"], "malformed time '-3'"),
            (["--partitions", "0,a"], "expected partition ids like 0,1,2"),
            (["--topic", "("], "not a regular expression"),
        ]:
            result = run("offsets", *args, *bootstrap)
            assert result.exit_code == 2, args
            assert message in result.stderr
            assert "Traceback" not in result.output


def test_parse_time_and_partition_ids() -> None:
    assert [parse_time(t) for t in ["earliest", "-2", "LATEST", "-1", "0", "1700"]] == [
        "earliest", "earliest", "latest", "latest", 0, 1700,
    ]  # fmt: skip
    assert parse_partition_ids(" 2,0,2 ") == [0, 2]
    with pytest.raises(ValueError):
        parse_partition_ids(",")
