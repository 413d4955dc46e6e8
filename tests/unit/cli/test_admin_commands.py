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


def created_names(node: FakeNode) -> list[list[str]]:
    requests = [request for _, request in node.requests]
    assert all(isinstance(r, pb.CreateTopicsRequest) for r in requests)
    return [[t.name for t in r.topics] for r in requests if isinstance(r, pb.CreateTopicsRequest)]


def test_cli_creates_many_topics_in_few_requests(start_node: Callable[[int], FakeNode]) -> None:
    """Issue 18 §2.3: a count or a file of names goes in requests of at most 500 topics and
    9,000 partitions, in order, each topic with the partitions and factor given."""
    node = start_node(1)
    base = ["topics", "create", "--bootstrap-controller", node.address, "--topic", "load"]
    result = CliRunner().invoke(cli, [*base, "--count", "1200", "--partitions", "10"])
    assert result.exit_code == 0, result.output
    batches = created_names(node)
    assert [len(names) for names in batches] == [500, 500, 200]
    assert [name for names in batches for name in names] == [f"load-{i}" for i in range(1200)]
    sent = node.requests[0][1]
    assert isinstance(sent, pb.CreateTopicsRequest)
    assert {(t.num_partitions, t.replication_factor) for t in sent.topics} == {(10, -1)}

    node.requests.clear()
    result = CliRunner().invoke(cli, [*base, "--count", "200", "--partitions", "100"])
    assert result.exit_code == 0, result.output
    assert [len(names) for names in created_names(node)] == [90, 90, 20]

    node.requests.clear()
    from_file = ["topics", "create", "--bootstrap-controller", node.address, "--topics-file", "-"]
    result = CliRunner().invoke(cli, from_file, input="a\n\nb\n c \n")
    assert result.exit_code == 0, result.output
    assert created_names(node) == [["a", "b", "c"]]


def test_cli_create_needs_names(start_node: Callable[[int], FakeNode]) -> None:
    node = start_node(1)
    base = ["topics", "create", "--bootstrap-controller", node.address]
    assert CliRunner().invoke(cli, [*base, "--count", "3"]).exit_code == 2
    assert CliRunner().invoke(cli, base).exit_code == 2
    assert node.requests == []


def test_cli_create_if_not_exists_leaves_existing_topics_alone(
    start_node: Callable[[int], FakeNode],
) -> None:
    """Kafka's --if-not-exists: a topic that exists is no error. It also covers a request whose
    answer was lost to an election (outcome unknown, so the client asks again and finds the
    topics it had created); without the flag the first such topic fails the command."""
    node = start_node(1)
    node.answers["CreateTopics"] = pb.CreateTopicsResponse(
        topics=[
            pb.CreateTopicsResult(
                name="t-0",
                error_code=common_pb2.TOPIC_ALREADY_EXISTS,
                error_message="Topic 't-0' already exists.",
            ),
            pb.CreateTopicsResult(name="t-1", num_partitions=1, replication_factor=1),
        ]
    )
    base = ["topics", "create", "--bootstrap-controller", node.address, "--topic", "t"]
    result = CliRunner().invoke(cli, [*base, "--count", "2", "--if-not-exists"])
    assert result.exit_code == 0, result.output
    assert result.output == "Created topic t-1.\n"

    result = CliRunner().invoke(cli, [*base, "--count", "2"])
    assert result.exit_code == 1
    assert "TOPIC_ALREADY_EXISTS: Topic 't-0' already exists." in result.output
