"""Controller configuration: Kafka's `id@host:port` lists, TOML plus flags, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.quorum.config import load_config, parse_node_addresses
from pykraft.quorum.storage import StorageError, check_meta_properties
from pykraft.server_common.config_files import ConfigError

VOTERS = "1@127.0.0.1:19091,2@127.0.0.1:19092,3@127.0.0.1:19093"
LISTENERS = "1@127.0.0.1:9091,2@127.0.0.1:9092,3@127.0.0.1:9093"


def test_parses_kafka_voter_lists() -> None:
    assert parse_node_addresses(VOTERS, key="v") == {
        1: "127.0.0.1:19091",
        2: "127.0.0.1:19092",
        3: "127.0.0.1:19093",
    }
    for bad in ("1@host", "x@h:1", "1@h:p", "1@h:1,1@h:2"):
        with pytest.raises(ConfigError):
            parse_node_addresses(bad, key="v")


def test_flags_override_the_toml_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        f'"node.id" = 1\n"controller.quorum.voters" = "{VOTERS}"\n'
        f'"controller.listeners" = "{LISTENERS}"\n"data.dir" = "{tmp_path}"\n'
        '"broker.session.timeout.ms" = 9000\n'
    )
    config = load_config(path, {"node.id": 2, "broker.session.timeout.ms": None})
    assert config.node_id == 2 and config.listener == "127.0.0.1:9092"
    assert config.broker_session_timeout_ms == 9000
    assert config.auto_leader_rebalance_enable is True
    assert config.leader_imbalance_check_interval_seconds == 300
    assert (config.metrics_listen, config.log_format) == ("", "text")
    config = load_config(path, {"metrics.listen": "127.0.0.1:0", "log.format": "json"})
    assert (config.metrics_listen, config.log_format) == ("127.0.0.1:0", "json")
    rebalance = {
        "auto.leader.rebalance.enable": False,
        "leader.imbalance.check.interval.seconds": 1,
    }
    config = load_config(path, rebalance)
    assert not config.auto_leader_rebalance_enable
    assert config.leader_imbalance_check_interval_seconds == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"node.id": 4}, "not in controller.quorum.voters"),
        ({"controller.listeners": "1@h:1"}, "same node ids"),
        ({"no.such.key": 1}, "unknown config keys"),
        ({"broker.session.timeout.ms": "soon"}, "must be an integer"),
        ({"auto.leader.rebalance.enable": "no"}, "must be true or false"),
        ({"leader.imbalance.check.interval.seconds": 0}, "must be positive"),
        ({"metrics.listen": "localhost"}, "is not of the form host:port"),
        ({"log.format": "xml"}, "must be one of text, json"),
    ],
)
def test_bad_settings_are_named(tmp_path: Path, overrides: dict[str, object], message: str) -> None:
    base = {
        "node.id": 1, "controller.quorum.voters": VOTERS,
        "controller.listeners": LISTENERS, "data.dir": str(tmp_path),
    }  # fmt: skip
    with pytest.raises(ConfigError, match=message):
        load_config(None, {**base, **overrides})


def test_data_dir_belongs_to_one_node_of_one_cluster(tmp_path: Path) -> None:
    check_meta_properties(tmp_path, node_id=1, cluster_id="a")
    check_meta_properties(tmp_path, node_id=1, cluster_id="a")
    with pytest.raises(StorageError, match=r"node\.id"):
        check_meta_properties(tmp_path, node_id=2, cluster_id="a")
    with pytest.raises(StorageError, match=r"cluster\.id"):
        check_meta_properties(tmp_path, node_id=1, cluster_id="b")


def test_meta_properties_and_its_directory_are_written_durably(
    tmp_path: Path, fsynced_paths: list[Path]
) -> None:
    """After a power loss the data directory still says whose it is: the file, its name and
    every directory made for it reach the disk before the controller starts."""
    data_dir = tmp_path / "data" / "controller-1"
    check_meta_properties(data_dir, node_id=1, cluster_id="a")
    for directory in (tmp_path, tmp_path / "data", data_dir):
        assert directory in fsynced_paths, f"{directory} was not fsynced"
    assert sorted(p.name for p in data_dir.iterdir()) == ["meta.properties"]
