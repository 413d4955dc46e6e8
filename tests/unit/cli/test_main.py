"""`pykraft` argument parsing and error output, without a cluster."""

from __future__ import annotations

import socket
import time
from importlib.metadata import EntryPoint

import click
import pytest
from click.testing import CliRunner, Result

from pykraft.cli import configs, main
from pykraft.cli.properties import split_properties


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main.cli, list(args), env=env or {"PYKRAFT_BOOTSTRAP": ""})


def assert_usage_error(result: Result, message: str) -> None:
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_help_lists_the_command_groups() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for group in ("topics", "configs", "cluster", "quorum", "offsets", "produce", "consume"):
        assert f"\n  {group} " in result.output


def test_config_without_equals_is_a_usage_error() -> None:
    result = run(
        "topics", "create", "--bootstrap-controller", "h:1", "--topic", "t", "--config", "x"
    )
    assert_usage_error(result, "Invalid value for '--config': expected key=value, got 'x'")


def test_missing_topic_is_a_usage_error() -> None:
    assert_usage_error(
        run("topics", "delete", "--bootstrap-controller", "h:1"), "Missing option '--topic'"
    )


def test_missing_bootstrap_is_a_usage_error() -> None:
    assert_usage_error(run("topics", "list"), "Missing option '--bootstrap-controller'")


def test_bootstrap_falls_back_to_the_environment_and_is_checked() -> None:
    result = run("topics", "list", env={"PYKRAFT_BOOTSTRAP": "no-port"})
    assert_usage_error(result, "bad address 'no-port' (expected host:port)")


def test_bootstrap_server_is_an_alias() -> None:
    result = run("quorum", "describe", "--bootstrap-server", "h:99999")
    assert_usage_error(result, "bad address 'h:99999'")


def test_zero_partitions_is_a_usage_error() -> None:
    result = run(
        "topics", "alter", "--bootstrap-controller", "h:1", "--topic", "t", "--partitions", "0"
    )
    assert_usage_error(result, "Invalid value for '--partitions'")


def test_configs_alter_needs_something_to_alter() -> None:
    result = run(
        "configs", "alter", "--bootstrap-controller", "h:1",
        "--entity-type", "topics", "--entity-name", "t",
    )  # fmt: skip
    assert_usage_error(result, "nothing to alter")


def test_entity_default_applies_to_brokers_only() -> None:
    result = run(
        "configs", "describe", "--bootstrap-controller", "h:1",
        "--entity-type", "topics", "--entity-default",
    )  # fmt: skip
    assert_usage_error(result, "--entity-default applies to brokers")


def test_unbalanced_brackets_in_add_config_are_a_usage_error() -> None:
    result = run(
        "configs", "alter", "--bootstrap-controller", "h:1", "--entity-type", "topics",
        "--entity-name", "t", "--add-config", "a=[1,2",
    )  # fmt: skip
    assert_usage_error(result, "unbalanced '['")


def test_offsets_with_an_unreachable_bootstrap_is_one_error_line() -> None:
    address = f"127.0.0.1:{closed_port()}"
    result = run("offsets", "--bootstrap-server", address, "--request-timeout-ms", "300")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: NETWORK_EXCEPTION: cannot reach {address}")
    assert len(result.stderr.splitlines()) == 1


def test_unreachable_bootstrap_is_a_clean_error_within_the_timeout() -> None:
    address = f"127.0.0.1:{closed_port()}"
    started = time.monotonic()
    result = run("topics", "list", "--bootstrap-controller", address, "--request-timeout-ms", "300")
    assert time.monotonic() - started < 5
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: NETWORK_EXCEPTION: cannot reach {address}")
    assert "Traceback" not in result.output


def test_parse_config_list_follows_kafka_syntax() -> None:
    parsed = configs.parse_config_list("a=1,b=[x,y],c=,d=e=f")
    assert parsed == {"a": "1", "b": "x,y", "c": "", "d": "e=f"}
    with pytest.raises(ValueError, match="expected key=value"):
        configs.parse_config_list("a=1,b")
    with pytest.raises(ValueError, match="unbalanced"):
        configs.parse_config_list("a=1]")


def test_a_config_value_keeps_its_commas_and_a_key_is_required() -> None:
    assert split_properties(["cleanup.policy=compact,delete"]) == {
        "cleanup.policy": "compact,delete"
    }
    with pytest.raises(ValueError, match="expected key=value"):
        split_properties(["=v"])


def test_entry_point_commands_are_added_under_their_name(monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = EntryPoint("demo", "pykraft.cli.cluster:quorum", main.PLUGIN_GROUP)
    monkeypatch.setattr(main, "_plugins", lambda: {"demo": plugin})
    assert "demo" in run("--help").output
    result = run("demo", "describe", "--help")
    assert result.exit_code == 0
    assert "Usage: cli demo describe" in result.output


def test_a_broken_entry_point_fails_only_when_used(monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = EntryPoint("broken", "pykraft.cli.no_such_module:command", main.PLUGIN_GROUP)
    monkeypatch.setattr(main, "_plugins", lambda: {"broken": plugin})
    assert run("--help").exit_code == 0
    result = run("broken", "run", "--some-flag")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: 'pykraft broken' is unavailable: ModuleNotFoundError")
    assert "Traceback" not in result.output


def commands(command: click.Command) -> list[click.Command]:
    """Every runnable command under `command` (the plugins aside: they are not loaded)."""
    if isinstance(command, click.Group):
        return [c for sub in command.commands.values() for c in commands(sub)]
    return [command]


def test_every_command_names_a_group_with_the_group_option() -> None:
    """Kafka's tools take the group as `--group G` (kafka-consumer-groups,
    kafka-console-consumer); so does every pykraft command that names one."""
    naming_a_group = {
        (command.name, param.name): param.opts
        for command in commands(main.cli)
        for param in command.params
        if "group" in (param.name or "")
    }
    assert set(naming_a_group) == {
        ("consume", "group"),
        ("describe", "group_id"),
        ("reset-offsets", "group_id"),
        ("delete", "group_ids"),
    }
    assert all(opts == ["--group"] for opts in naming_a_group.values()), naming_a_group


def test_topics_and_groups_are_options_not_positional_arguments() -> None:
    """Kafka's tools name everything with options (--topic, --group); the only positional
    argument left is the node of `pykraft dev kill|stop|start`, which Kafka has no tool for."""
    arguments = {
        (command.name, param.name)
        for command in commands(main.cli)
        for param in command.params
        if isinstance(param, click.Argument)
    }
    assert arguments == {("kill", "node"), ("stop", "node"), ("start", "node")}
