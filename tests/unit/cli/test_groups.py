"""`pykraft groups` (kafka-consumer-groups): output, option checks and the offset arithmetic of
reset-offsets, against in-process brokers over real gRPC (fake_group_admin) where a cluster is
needed."""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner, Result

from pykraft.cli.groups import parse_states
from pykraft.cli.groups_tables import assignment_text, offset_rows
from pykraft.cli.main import cli
from pykraft.client.admin_types import (
    ConsumerGroupDescription,
    GroupState,
    MemberDescription,
    Node,
)
from pykraft.client.types import OffsetAndMetadata, TopicPartition
from pykraft.proto import common_pb2
from tests.unit.client.fake_group_admin import FakeGroup, FakeMember, GroupCluster, running

T0, T1, T2, U0 = (TopicPartition(*p) for p in [("t", 0), ("t", 1), ("t", 2), ("u", 0)])


def run(cluster: GroupCluster | None, *args: str) -> Result:
    bootstrap = ["--bootstrap-server", cluster.bootstrap] if cluster else []
    return CliRunner().invoke(cli, ["groups", *args, *bootstrap], env={"PYKRAFT_BOOTSTRAP": ""})


def describe(cluster: GroupCluster | None, group: str, *args: str) -> Result:
    return run(cluster, "describe", "--group", group, *args)


def reset_offsets(cluster: GroupCluster | None, group: str, *args: str) -> Result:
    return run(cluster, "reset-offsets", "--group", group, *args)


def delete(cluster: GroupCluster, *groups: str, options: tuple[str, ...] = ()) -> Result:
    """`groups delete` of each group (Kafka's tool takes --group once per group)."""
    return run(cluster, "delete", *(arg for g in groups for arg in ("--group", g)), *options)


def ok(result: Result) -> list[list[str]]:
    """The command succeeded; its stdout lines split into cells."""
    assert result.exit_code == 0, result.output
    return [line.split() for line in result.stdout.splitlines()]


def assert_usage_error(result: Result, message: str) -> None:
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def a_cluster(cluster: GroupCluster) -> None:
    """Topic t (3 partitions, log 2..10 on t-0, 0..10 elsewhere, led by 1) and u (1 partition,
    0..4, led by 2); group `busy` (Stable, on 2) and `idle` (Empty, on 1)."""
    cluster.add_topic("t", 3, leader=1, end=10)
    cluster.add_topic("u", 1, leader=2, end=4)
    cluster.log_start[T0] = 2
    cluster.groups["busy"] = FakeGroup(
        coordinator=2,
        state="Stable",
        members=[
            FakeMember("member-b", [U0], client_id="c-b", instance_id="static-b"),
            FakeMember("member-a", [T0, T1], client_id="c-a"),
        ],
        offsets={T0: (5, "", -1), T2: (7, "", -1), TopicPartition("gone", 0): (3, "", -1)},
    )
    cluster.groups["idle"] = FakeGroup(coordinator=1, offsets={T1: (1, "", -1), U0: (3, "", -1)})


def test_groups_is_a_command_group_of_pykraft() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert "\n  groups " in result.output
    result = CliRunner().invoke(cli, ["groups", "--help"])
    for command in ("list", "describe", "reset-offsets", "delete"):
        assert f"\n  {command} " in result.output


# list ------------------------------------------------------------------------------------------


def test_list_prints_one_group_a_line_and_states_on_request() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        assert ok(run(cluster, "list")) == [["busy"], ["idle"]]
        assert ok(run(cluster, "list", "--state")) == [
            ["GROUP", "STATE"], ["busy", "Stable"], ["idle", "Empty"],
        ]  # fmt: skip
        assert ok(run(cluster, "list", "--state", "STABLE,reconciling")) == [
            ["GROUP", "STATE"], ["busy", "Stable"],
        ]  # fmt: skip
        listed = json.loads(run(cluster, "list", "--output", "json").stdout)
        assert listed == [
            {"group_id": "busy", "state": "Stable"}, {"group_id": "idle", "state": "Empty"},
        ]  # fmt: skip


def test_list_refuses_an_unknown_state() -> None:
    result = run(None, "list", "--state", "Stable,Busy", "--bootstrap-server", "h:1")
    assert_usage_error(result, "Invalid state list 'Stable,Busy'. Valid states are: Empty,")


# describe --------------------------------------------------------------------------------------


def test_describe_prints_a_row_per_owned_or_committed_partition() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        result = describe(cluster, "busy")
        assert ok(result) == [
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
             "CONSUMER-ID", "HOST", "CLIENT-ID"],
            ["busy", "t", "0", "5", "10", "5", "member-a", "/127.0.0.1", "c-a"],
            ["busy", "t", "1", "-", "10", "-", "member-a", "/127.0.0.1", "c-a"],
            ["busy", "u", "0", "-", "4", "-", "member-b", "/127.0.0.1", "c-b"],
            ["busy", "gone", "0", "3", "-", "-", "-", "-", "-"],  # its topic was deleted
            ["busy", "t", "2", "7", "10", "3", "-", "-", "-"],
        ]  # fmt: skip
        assert result.stderr == ""


def test_describe_says_when_a_group_has_no_members_or_rebalances() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        idle = describe(cluster, "idle")
        assert ok(idle)[1:] == [
            ["idle", "t", "1", "1", "10", "9", "-", "-", "-"],
            ["idle", "u", "0", "3", "4", "1", "-", "-", "-"],
        ]
        assert idle.stderr == "Consumer group 'idle' has no active members.\n"
        cluster.groups["busy"].state = "Assigning"
        assert describe(cluster, "busy").stderr == (
            "Warning: Consumer group 'busy' is rebalancing.\n"
        )


def test_describe_of_an_unknown_group_is_one_error_line() -> None:
    with running(nodes=1) as cluster:
        result = describe(cluster, "nope")
        assert result.exit_code == 1
        assert result.stderr.startswith("Error: GROUP_ID_NOT_FOUND: ")
        assert "Group nope not found." in result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_describe_state_shows_coordinator_assignor_state_and_members() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        coordinator = f"{cluster.nodes[1].address} (2)"
        state = ok(describe(cluster, "busy", "--state"))
        assert state[0] == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE",
                            "#MEMBERS"]  # fmt: skip
        assert state[1] == ["busy", *coordinator.split(), "uniform", "Stable", "2"]
        verbose = ok(describe(cluster, "busy", "--state", "--verbose"))
        assert verbose[0][-3:] == ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
        assert verbose[1][-3:] == ["5", "5", "2"]


def test_describe_members_shows_each_member_and_with_verbose_its_assignments() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        cluster.groups["busy"].members[1].target_assignment = [T0]
        assert ok(describe(cluster, "busy", "--members")) == [
            ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
            ["busy", "member-b", "static-b", "/127.0.0.1", "c-b", "1"],
            ["busy", "member-a", "-", "/127.0.0.1", "c-a", "2"],
        ]
        verbose = ok(describe(cluster, "busy", "--members", "--verbose"))
        assert verbose[0][-4:] == [
            "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT",
        ]  # fmt: skip
        assert [row[-4:] for row in verbose[1:]] == [
            ["3", "u:0", "5", "u:0"],
            ["3", "t:0,1", "5", "t:0"],
        ]


def test_describe_json_has_the_description_and_the_rows() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        described = json.loads(describe(cluster, "idle", "--output", "json").stdout)
        assert described["state"] == "Empty"
        assert described["coordinator"] == {"id": 1, "address": cluster.nodes[0].address}
        assert described["offsets"][0] == {
            "topic": "t", "partition": 1, "current_offset": 1, "log_end_offset": 10, "lag": 9,
            "consumer_id": None, "host": None, "client_id": None,
        }  # fmt: skip


def test_describe_takes_one_view() -> None:
    result = describe(None, "g", "--members", "--state", "--bootstrap-server", "h:1")
    assert_usage_error(result, "give at most one of --members and --state")


# reset-offsets ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--to-earliest", "--dry-run"], "give exactly one of --topic and --all-topics"),
        (["--topic", "t", "--all-topics", "--to-earliest", "--dry-run"], "exactly one of --topic"),
        (["--topic", "t", "--dry-run"], "give exactly one of --to-earliest, --to-latest, --to-"),
        (["--topic", "t", "--to-earliest", "--shift-by", "1", "--dry-run"], "exactly one of --to-"),
        (["--topic", "t", "--to-earliest"], "give exactly one of --dry-run and --execute"),
        (["--topic", "t", "--to-earliest", "--dry-run", "--execute"], "one of --dry-run and"),
        (["--topic", "t:a", "--to-earliest", "--dry-run"], "Invalid topic arg 't:a'"),
        (["--topic", "t", "--to-datetime", "yesterday", "--dry-run"], "Error parsing timestamp"),
    ],
)
def test_reset_offsets_option_checks(args: list[str], message: str) -> None:
    result = reset_offsets(None, "g", *args, "--bootstrap-server", "h:1")
    assert_usage_error(result, message)


def test_dry_run_prints_the_plan_and_commits_nothing() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        result = reset_offsets(cluster, "idle", "--all-topics", "--to-earliest", "--dry-run")
        assert ok(result) == [
            ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
            ["idle", "t", "1", "0"],
            ["idle", "u", "0", "0"],
        ]
        assert cluster.requests_to("OffsetCommit") == []
        assert cluster.groups["idle"].offsets[T1] == (1, "", -1)


def test_execute_commits_offsets_clamped_into_the_log() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        result = reset_offsets(
            cluster, "idle", "--topic", "t:0,2", "--topic", "u", "--to-offset", "6", "--execute"
        )
        assert ok(result)[1:] == [
            ["idle", "t", "0", "6"],
            ["idle", "t", "2", "6"],
            ["idle", "u", "0", "4"],
        ]
        assert cluster.groups["idle"].offsets == {
            T0: (6, "", -1), T1: (1, "", -1), T2: (6, "", -1), U0: (4, "", -1),
        }  # fmt: skip
        low = reset_offsets(cluster, "idle", "--topic", "t:0", "--to-offset", "1", "--execute")
        assert ok(low)[1:] == [["idle", "t", "0", "2"]]  # the log starts at 2
        (commit, _) = cluster.requests_to("OffsetCommit")
        assert (commit.member_id, commit.member_epoch) == ("", -1)


def test_shift_by_moves_from_the_committed_offset() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        back = reset_offsets(cluster, "idle", "--all-topics", "--shift-by", "-2", "--dry-run")
        assert ok(back)[1:] == [["idle", "t", "1", "0"], ["idle", "u", "0", "1"]]
        ahead = reset_offsets(cluster, "idle", "--topic", "u", "--shift-by", "5", "--dry-run")
        assert ok(ahead)[1:] == [["idle", "u", "0", "4"]]
        uncommitted = reset_offsets(cluster, "idle", "--topic", "t", "--shift-by", "1", "--dry-run")
        assert_usage_error(
            uncommitted,
            "Cannot shift offset for partition t-0 since there is no current committed offset",
        )


def test_to_datetime_finds_the_first_later_record_or_the_log_end() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        cluster.timestamps[U0] = [1000, 1000, 1000, 1000]
        # Records of t are stamped 1000 + offset ms.
        result = reset_offsets(
            cluster, "idle", "--topic", "t:1", "--topic", "u",
            "--to-datetime", "1970-01-01T01:00:01.004+01:00", "--dry-run",
        )  # fmt: skip
        assert ok(result)[1:] == [["idle", "t", "1", "4"], ["idle", "u", "0", "4"]]
        assert result.stderr == (
            "Warn: Partition 0 from topic u is empty. Falling back to latest known offset.\n"
        )
        (_, _, by_time) = cluster.requests_to("ListOffsets", 1)
        assert [p.timestamp for t in by_time.topics for p in t.partitions] == [1004]


def test_reset_refuses_a_group_with_members() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        result = reset_offsets(cluster, "busy", "--all-topics", "--to-latest", "--execute")
        assert result.exit_code == 1
        assert result.stderr == (
            "Error: NON_EMPTY_GROUP: Assignments can only be reset if the group 'busy' is "
            "inactive, but the current state is Stable.\n"
        )
        assert cluster.requests_to("OffsetCommit") == []


def test_reset_refuses_when_a_member_joins_before_the_commit() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        cluster.header_errors[("OffsetCommit", 1)] = [common_pb2.UNKNOWN_MEMBER_ID]
        result = reset_offsets(cluster, "idle", "--topic", "u", "--to-latest", "--execute")
        assert result.exit_code == 1
        assert result.stderr.startswith(
            "Error: NON_EMPTY_GROUP: Assignments can only be reset if the group 'idle' is "
            "inactive, but it has members now"
        )
        assert cluster.groups["idle"].offsets[U0] == (3, "", -1)


def test_reset_of_an_unknown_group_creates_its_offsets() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        result = reset_offsets(cluster, "new", "--topic", "u", "--to-latest", "--execute")
        assert ok(result)[1:] == [["new", "u", "0", "4"]]
        assert cluster.groups["new"].offsets == {U0: (4, "", -1)}


def test_reset_checks_that_partitions_exist_and_have_leaders() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        missing = reset_offsets(cluster, "idle", "--topic", "t:1,7", "--to-latest", "--execute")
        assert missing.exit_code == 1
        assert missing.stderr == (
            'Error: UNKNOWN_TOPIC_OR_PARTITION: The partitions "t-7" do not exist\n'
        )
        unknown = reset_offsets(cluster, "idle", "--topic", "x", "--to-latest", "--execute")
        assert unknown.stderr == "Error: UNKNOWN_TOPIC_OR_PARTITION: Unknown topic 'x'.\n"
        cluster.leaders[T2] = -1
        leaderless = reset_offsets(cluster, "idle", "--topic", "t", "--to-latest", "--dry-run")
        assert leaderless.stderr == (
            'Error: LEADER_NOT_AVAILABLE: The partitions "t-2" have no leader\n'
        )
        assert cluster.requests_to("OffsetCommit") == []


def test_groups_without_a_broker_fail_with_one_clear_line() -> None:
    with running(nodes=1) as cluster:
        cluster.registered = False
        result = run(cluster, "list")
        assert result.exit_code == 1
        assert result.stderr == (
            "Error: BROKER_NOT_AVAILABLE: the cluster has no live broker to ask for consumer "
            "groups; start a broker\n"
        )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    unreachable = describe(None, "g", "--bootstrap-server", address, "--request-timeout-ms", "300")
    assert unreachable.exit_code == 1
    assert unreachable.stderr.startswith(f"Error: NETWORK_EXCEPTION: cannot reach {address}")
    assert len(unreachable.stderr.splitlines()) == 1


# delete ----------------------------------------------------------------------------------------


def test_delete_reports_each_group() -> None:
    with running(nodes=2) as cluster:
        a_cluster(cluster)
        cluster.groups["other"] = FakeGroup(coordinator=2)
        done = delete(cluster, "other")
        assert done.exit_code == 0
        assert done.stdout == "Deletion of requested consumer groups ('other') was successful.\n"
        partly = delete(cluster, "idle", "busy", "nope")
        assert partly.exit_code == 1
        assert partly.stdout == "These consumer groups were deleted successfully: 'idle'\n"
        errors = partly.stderr.splitlines()
        assert errors[0].startswith("Error: NON_EMPTY_GROUP: Group 'busy' could not be deleted: ")
        assert errors[1].startswith("Error: GROUP_ID_NOT_FOUND: Group 'nope' could not be deleted")
        assert sorted(cluster.groups) == ["busy"]


def test_delete_json_lists_what_was_deleted_and_what_failed() -> None:
    with running(nodes=1) as cluster:
        cluster.groups["a"] = FakeGroup(coordinator=1)
        result = delete(cluster, "a", "nope", options=("--output", "json"))
        assert result.exit_code == 1
        outcome = json.loads(result.stdout)
        assert outcome["deleted"] == ["a"]
        assert [(f["group_id"], f["error"]) for f in outcome["failed"]] == [
            ("nope", "GROUP_ID_NOT_FOUND")
        ]


def test_delete_needs_a_group() -> None:
    assert_usage_error(run(None, "delete", "--bootstrap-server", "h:1"), "Missing option '--group'")


# pure pieces -----------------------------------------------------------------------------------


def test_parse_states() -> None:
    assert parse_states("stable, EMPTY") == [GroupState.STABLE, GroupState.EMPTY]
    assert parse_states("") == []
    with pytest.raises(ValueError, match="Valid states are: Empty, Assigning, Reconciling"):
        parse_states("PreparingRebalance")


def test_offset_rows_order_owners_by_partition_count_then_unowned() -> None:
    def member(member_id: str, owned: set[TopicPartition]) -> MemberDescription:
        return MemberDescription(member_id, None, "c", "h", frozenset(owned), frozenset(), 1)

    group = ConsumerGroupDescription(
        "g", GroupState.STABLE, Node(1, "h:1"), 1, 1, "uniform",
        [member("few", {U0}), member("none", set()), member("many", {T1, T0})],
    )  # fmt: skip
    committed = {T2: OffsetAndMetadata(4), T0: OffsetAndMetadata(1)}
    rows = offset_rows(group, committed, {T0: 3, U0: 8})
    assert [(str(TopicPartition(r.topic, r.partition)), r.consumer_id, r.lag) for r in rows] == [
        ("t-0", "many", 2), ("t-1", "many", None), ("u-0", "few", None), ("t-2", None, None),
    ]  # fmt: skip
    assert assignment_text({U0, T1, T0}) == "t:0,1;u:0"
    assert assignment_text(set()) == "-"
