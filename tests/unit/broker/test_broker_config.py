from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pykraft.broker.config import (
    OPEN_FILES_RESERVED,
    BrokerConfig,
    check_open_files_limit,
    config_from_mapping,
    load_config,
)
from pykraft.broker.kafka.api import KAFKA_LISTENER_NAME
from pykraft.server_common.config_files import ConfigError

ROOT = Path(__file__).resolve().parents[3]
BASE: dict[str, Any] = {
    "node.id": 1,
    "listeners": "127.0.0.1:9191",
    "log.dirs": "/data/a, /data/b",
    "controller.quorum.bootstrap.servers": "127.0.0.1:9091,127.0.0.1:9092",
}


@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_example_files_load(n: int) -> None:
    config = load_config(ROOT / "deploy" / "local" / f"broker-{n}.toml", {})
    assert config.node_id == n
    assert config.port == 9290 + n and config.host == "127.0.0.1"
    assert config.log_dirs == (Path(f"data/broker-{n}"),)
    assert config.metadata_dir == Path(f"data/broker-{n}/__cluster_metadata")
    assert len(config.controller_bootstrap_servers) == 3
    assert (config.heartbeat_interval_ms, config.session_timeout_ms) == (2000, 9000)
    assert config.metrics_listen == f"127.0.0.1:959{n}" and config.log_format == "text"


def test_metrics_listen_and_log_format_default_to_off_and_text() -> None:
    config = config_from_mapping(BASE)
    assert (config.metrics_listen, config.log_format) == ("", "text")
    config = config_from_mapping({**BASE, "metrics.listen": "0.0.0.0:0", "log.format": "json"})
    assert (config.metrics_listen, config.log_format) == ("0.0.0.0:0", "json")
    with pytest.raises(ConfigError, match="is not of the form host:port"):
        config_from_mapping({**BASE, "metrics.listen": "9404"})


def test_flags_override_the_file_and_defaults_are_kafkas(tmp_path: Path) -> None:
    path = tmp_path / "broker.toml"
    path.write_text('"node.id" = 4\n"listeners" = "h:1"\n"log.dirs" = "d"\n'
                    '"controller.quorum.bootstrap.servers" = "c:2"\n')  # fmt: skip
    config = load_config(path, {"node.id": 7, "broker.rack": None, "min.insync.replicas": 2})
    assert config.node_id == 7
    assert config.rack == ""
    assert config.replica_lag_time_max_ms == 30_000
    assert config.replica_selector_class == ""  # consumers read from leaders
    assert config.topic_defaults == {"min.insync.replicas": "2"}


def test_lists_are_split() -> None:
    config = config_from_mapping(BASE)
    assert config.log_dirs == (Path("/data/a"), Path("/data/b"))
    assert config.controller_bootstrap_servers == ("127.0.0.1:9091", "127.0.0.1:9092")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"node.id": None}, "missing required setting node.id"),
        ({"listeners": "nohost"}, "listeners: 'nohost' is not of the form host:port"),
        ({"listeners": "a:1,b:2"}, "GRPC is named twice"),
        ({"listeners": "KAFKA://a:1"}, "must name the gRPC listener"),
        ({"listeners": "SSL://a:1"}, "unknown listener 'SSL'"),
        ({"advertised.listeners": "KAFKA://a:1"}, "names a listener that listeners does not"),
        ({"listeners": "h:1,KAFKA://0.0.0.0:2"}, "KAFKA binds 0.0.0.0: set advertised.listeners"),
        ({"node.id": "one"}, "node.id must be an integer"),
        ({"log.dir": "x"}, "unknown config keys: log.dir"),
        ({"broker.session.timeout.ms": 100}, "must be longer than broker.heartbeat"),
        ({"controller.quorum.bootstrap.servers": "c:99999"}, "is not of the form host:port"),
        ({"min.insync.replicas": 0}, "min.insync.replicas"),
        ({"test.drop.produce.responses.every": -1}, "test.drop.produce.responses.every"),
        ({"replica.selector.class": "RackAware"}, "replica.selector.class: 'RackAware' is none"),
        ({"log.open.files.max": 0}, "log.open.files.max must be positive"),
        ({"log.flush.offset.checkpoint.interval.ms": 0}, "must be positive"),
        ({"num.recovery.threads.per.data.dir": 0}, "num.recovery.threads.per.data.dir must be"),
    ],
)
def test_errors_say_what_is_wrong(change: dict[str, Any], message: str) -> None:
    raw = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    with pytest.raises(ConfigError, match=message):
        config_from_mapping(raw)


def test_an_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.toml", {})


def test_the_test_hook_that_drops_produce_responses_is_off_by_default() -> None:
    assert config_from_mapping(BASE).test_drop_produce_responses_every == 0
    config = config_from_mapping({**BASE, "test.drop.produce.responses.every": 3})
    assert config.test_drop_produce_responses_every == 3


def test_the_test_hook_has_a_flag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from pykraft.broker import cli

    started: list[BrokerConfig] = []

    def serve(config: BrokerConfig) -> int:
        started.append(config)
        return 0

    monkeypatch.setattr(cli, "_serve_until_stopped", serve)
    flags = ["--node-id", "1", "--listeners", "127.0.0.1:9191", "--log-dirs", str(tmp_path)]
    flags += ["--bootstrap-controllers", "127.0.0.1:9091"]
    result = CliRunner().invoke(cli.run, [*flags, "--test-drop-produce-responses-every", "4"])
    assert result.exit_code == 0, result.output
    assert [config.test_drop_produce_responses_every for config in started] == [4]


def test_group_and_log_maintenance_settings_take_kafkas_names() -> None:
    config = config_from_mapping(
        {
            **BASE,
            "group.consumer.session.timeout.ms": "6000",
            "group.consumer.heartbeat.interval.ms": 500,
            "offsets.retention.minutes": 2,
            "group.consumer.assignors": "range,uniform",
            "group.initial.rebalance.delay.ms": 0,
            "log.retention.check.interval.ms": 1000,
            "log.flush.offset.checkpoint.interval.ms": 5000,
        }
    )
    assert config.group.session_timeout_ms == 6000
    assert config.group.heartbeat_interval_ms == 500
    assert config.group.offsets_retention_ms == 120_000
    assert config.group.assignors == ("range", "uniform")
    assert config.group.initial_rebalance_delay_ms == 0
    assert config_from_mapping(BASE).group.initial_rebalance_delay_ms == 3000, "Kafka's default"
    assert config.log_retention_check_interval_ms == 1000
    assert config.log_flush_offset_checkpoint_interval_ms == 5000
    assert config_from_mapping(BASE).log_flush_offset_checkpoint_interval_ms == 60_000
    assert config.group.offsets_topic_partitions == 50, "Kafka's default where not set"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"group.consumer.heartbeat.interval.ms": 50_000}, "heartbeat.interval.ms must be shorter"),
        ({"offsets.topic.num.partitions": 0}, "offsets_topic_partitions must be positive"),
        ({"log.retention.check.interval.ms": 0}, "log.retention.check.interval.ms"),
        ({"group.consumer.session.timeout.ms": "soon"}, "must be an integer"),
        ({"group.initial.rebalance.delay.ms": -1}, "initial.rebalance.delay.ms must not be"),
    ],
)
def test_bad_group_settings_are_named(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_mapping({**BASE, **change})


def test_listeners_take_kafkas_syntax_and_advertised_ones_default_to_them() -> None:
    config = config_from_mapping({**BASE, "listeners": "GRPC://h:9191,kafka://h:9092"})
    assert (config.listener, config.kafka_listener) == ("h:9191", "h:9092")
    assert (config.kafka_host, config.kafka_port) == ("h", 9092)
    assert config.advertised_endpoints() == (
        ("PLAINTEXT", "h", 9191),
        (KAFKA_LISTENER_NAME, "h", 9092),
    )
    advertised = {"advertised.listeners": "KAFKA://broker-1.example:19092"}
    config = config_from_mapping({**BASE, **advertised, "listeners": "h:1,KAFKA://0.0.0.0:2"})
    assert config.advertised_endpoints() == (
        ("PLAINTEXT", "h", 1),
        (KAFKA_LISTENER_NAME, "broker-1.example", 19092),
    )


def test_a_bare_host_port_is_the_grpc_listener_alone() -> None:
    config = config_from_mapping(BASE)
    assert config.kafka_listener == ""
    assert config.advertised_endpoints() == (("PLAINTEXT", "127.0.0.1", 9191),)


def test_the_data_listener_binds_beside_grpc_unless_named_and_registers_its_bound_port() -> None:
    config = config_from_mapping(BASE)
    assert config.data_bind == ("127.0.0.1", 0)
    assert config.advertised_endpoints(40001)[1] == ("DATA", "127.0.0.1", 40001)
    config = config_from_mapping({**BASE, "listeners": "GRPC://h:1,DATA://d:2"})
    assert config.data_bind == ("d", 2)
    assert config.advertised_endpoints(2)[1] == ("DATA", "d", 2)
    wildcard = {"listeners": "0.0.0.0:1", "advertised.listeners": "GRPC://broker-1.example:1"}
    config = config_from_mapping({**BASE, **wildcard})
    assert config.data_bind == ("0.0.0.0", 0)
    assert config.advertised_endpoints(40002)[1] == ("DATA", "broker-1.example", 40002)
    with pytest.raises(ConfigError, match=r"DATA binds 0\.0\.0\.0"):
        config_from_mapping({**BASE, "listeners": "h:1,DATA://0.0.0.0:2"})


def test_the_rack_aware_replica_selector_takes_kafkas_class_name() -> None:
    name = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    config = config_from_mapping({**BASE, "broker.rack": "r1", "replica.selector.class": name})
    assert (config.rack, config.replica_selector_class) == ("r1", name)


def test_the_open_files_limit_must_leave_room_beyond_log_open_files_max() -> None:
    config = config_from_mapping({**BASE, "log.open.files.max": 500})
    assert config_from_mapping(BASE).log_open_files_max == 1000
    assert config_from_mapping(BASE).num_recovery_threads_per_data_dir == 4
    check_open_files_limit(config, 500 + OPEN_FILES_RESERVED)
    with pytest.raises(ConfigError, match=r"log.open.files.max=500 needs 756 open .* only 700"):
        check_open_files_limit(config, 700)


def test_a_broker_refuses_to_start_when_its_process_may_open_too_few_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from pykraft.broker import cli

    monkeypatch.setattr(cli, "raise_open_files_limit", lambda: 300)
    monkeypatch.setattr(cli, "_serve_until_stopped", lambda config: 0)
    flags = ["--node-id", "1", "--listeners", "127.0.0.1:9191", "--log-dirs", str(tmp_path)]
    flags += ["--bootstrap-controllers", "127.0.0.1:9091"]
    assert CliRunner().invoke(cli.run, [*flags, "--log-open-files-max", "44"]).exit_code == 0
    refused = CliRunner().invoke(cli.run, [*flags, "--log-open-files-max", "45"])
    assert refused.exit_code == 2 and "may open only 300" in refused.output
