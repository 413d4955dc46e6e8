"""`pykraft cluster`, `leaders` and `topics` against in-process AdminService servers over real
gRPC (`fake_controller`): output, redirects to the active controller, errors by code name."""

from __future__ import annotations

import json
from collections.abc import Callable

from click.testing import CliRunner

from pykraft.cli.main import cli
from pykraft.proto import admin_pb2 as pb
from pykraft.proto import common_pb2
from tests.unit.client.fake_controller import ELECTED, FakeNode, follower_and_active


def test_cli_leaders_elect_prints_each_partition(start_node: Callable[[int], FakeNode]) -> None:
    node = start_node(1)
    node.answers["ElectLeaders"] = ELECTED
    args = ["leaders", "elect", "--topic", "t", "--bootstrap-controller", node.address]
    as_json = CliRunner().invoke(cli, [*args, "--output", "json"])
    assert as_json.exit_code == 0, as_json.output
    assert [(r["partition"], r["result"]) for r in json.loads(as_json.output)] == [
        (0, "NONE"),
        (1, "ELECTION_NOT_NEEDED"),
    ]
    table = CliRunner().invoke(cli, args)
    assert table.exit_code == 0, table.output
    assert table.output.splitlines()[2].split()[:3] == ["t", "1", "ELECTION_NOT_NEEDED"]
    request = node.requests[0][1]
    assert isinstance(request, pb.ElectLeadersRequest)
    assert [(t.topic, list(t.partitions)) for t in request.topic_partitions] == [("t", [])]
    lone_partition = CliRunner().invoke(
        cli, ["leaders", "elect", "--partition", "0", "--bootstrap-controller", node.address]
    )
    assert lone_partition.exit_code == 2


def test_cli_prints_json_from_the_active_controller(
    start_node: Callable[[int], FakeNode],
) -> None:
    follower, _ = follower_and_active(start_node)
    result = CliRunner().invoke(
        cli, ["cluster", "describe", "--bootstrap-controller", follower.address, "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "cluster_id": "c1",
        "controller_id": 2,
        "controllers": [{"id": 2, "address": "127.0.0.1:2", "is_active": True}],
        "brokers": [{"id": 7, "address": "h:7", "rack": "r1", "state": "unfenced"}],
    }


def test_cli_reports_kafka_errors_by_code_name(start_node: Callable[[int], FakeNode]) -> None:
    node = start_node(1)
    node.answers["CreatePartitions"] = pb.CreatePartitionsResponse(
        topics=[
            pb.CreatePartitionsResult(
                name="t",
                error_code=common_pb2.INVALID_PARTITIONS,
                error_message="Topic currently has 3 partitions, which is higher than 2.",
            )
        ]
    )
    args = ["topics", "alter", "--bootstrap-controller", node.address, "--topic", "t"]
    result = CliRunner().invoke(cli, [*args, "--partitions", "2"])
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: INVALID_PARTITIONS: Topic currently has 3 partitions, which is higher than 2.\n"
    )
    sent = node.requests[0][1]
    assert isinstance(sent, pb.CreatePartitionsRequest)
    assert [(t.name, t.count) for t in sent.topics] == [("t", 2)]
