"""`pykraft consume --group` through click's CliRunner against the fake coordinator: it
subscribes, prints, commits what it printed, and the next run goes on from there."""

from __future__ import annotations

from click.testing import CliRunner, Result

from pykraft.cli.main import cli
from pykraft.client.types import TopicPartition
from tests.unit.client.fake_coordinator import running_group

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
TOPIC_AND_GROUP = ("--topic", "t", "--group", "cli")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"PYKRAFT_BOOTSTRAP": ""})


def test_consume_with_a_group_commits_what_it_printed_and_goes_on_from_there() -> None:
    with running_group({"t": 2}) as (cluster, coordinator):
        cluster.append(T0, [b"a0", b"a1", b"a2"])
        cluster.append(T1, [b"b0", b"b1"])
        args = ["consume", *TOPIC_AND_GROUP, "--bootstrap-server", cluster.bootstrap]
        first = run(*args, "--from-beginning", "--max-messages", "3", "--print-partition")
        assert first.exit_code == 0, first.output
        printed = first.stdout.splitlines()
        assert len(printed) == 3
        assert coordinator.heartbeats[0].group_id == "cli"
        assert list(coordinator.heartbeats[0].subscribed_topic_names) == ["t"]
        assert coordinator.heartbeats[-1].member_epoch == -1  # left on exit
        committed = (coordinator.commit_offset(T0) or 0) + (coordinator.commit_offset(T1) or 0)
        assert committed == 3  # exactly what was printed

        second = run(*args, "--from-beginning", "--timeout-ms", "500")
        assert second.exit_code == 0, second.output
        rest = second.stdout.splitlines()
        assert sorted(
            printed + [f"Partition:{'ab'.index(line[0])}\t{line}" for line in rest]
        ) == sorted(
            [*(f"Partition:0\ta{i}" for i in range(3)), *(f"Partition:1\tb{i}" for i in range(2))]
        )
        assert "Processed a total of 2 messages" in second.stderr


def test_consume_group_excludes_partition_and_offset() -> None:
    with running_group({"t": 2}) as (cluster, _):
        args = ["consume", *TOPIC_AND_GROUP, "--bootstrap-server", cluster.bootstrap]
        for extra in (["--partition", "0"], ["--partition", "0", "--offset", "1"]):
            result = run(*args, *extra)
            assert result.exit_code == 2
            assert "--group reads what the group assigns" in result.stderr
