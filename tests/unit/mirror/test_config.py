"""The mirror's settings: MM2's names and defaults, checked once, and Java properties files
read as Kafka's tools read them (issue 15 §2.1)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pykraft.mirror.config import (
    IDENTITY_POLICY_CLASS,
    MirrorConfig,
    NameFilter,
    read_properties,
)


def test_defaults_are_mm2s() -> None:
    config = MirrorConfig()
    assert config.replication_factor == 2
    assert config.emit_checkpoints_interval_seconds == 60
    assert config.sync_group_offsets_enabled is False
    assert config.offset_lag_max == 100
    topics = config.topic_filter()
    assert topics.matches("orders")
    for excluded in (
        "mm2-offset-syncs.source.internal",
        "a-internal",
        "x.replica",
        "__consumer_offsets",
    ):
        assert not topics.matches(excluded), excluded
    groups = config.group_filter()
    assert groups.matches("billing") and not groups.matches("console-consumer-12")
    configs = config.config_filter()
    assert configs.matches("retention.ms") and not configs.matches("min.insync.replicas")


def test_properties_convert_by_the_defaults_type() -> None:
    config = MirrorConfig.from_properties(
        {
            "topics": "orders.*, payments",
            "replication.factor": " 3 ",
            "offset-syncs.topic.replication.factor": "-1",
            "sync.group.offsets.enabled": "TRUE",
            "replication.policy.class": IDENTITY_POLICY_CLASS,
            "source.cluster.alias": "east",
        }
    )
    assert config.replication_factor == 3
    assert config.offset_syncs_topic_replication_factor == -1
    assert config.sync_group_offsets_enabled is True
    assert config.policy().identity and config.policy().source_alias == "east"
    assert config.topic_filter().matches("payments")
    assert not config.topic_filter().matches("payments-eu")  # a whole-name match


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"topic": "x"}, "unknown mirror properties 'topic'; known: "),
        ({"replication.factor": "two"}, "replication.factor must be an integer"),
        ({"replication.factor": "0"}, "replication.factor must be at least 1, or -1"),
        ({"emit.checkpoints.interval.seconds": "0"}, "must be at least 1"),
        ({"sync.group.offsets.enabled": "yes"}, "must be true or false"),
        ({"topics": "orders("}, "topics: 'orders(' is not a list of regular expressions"),
        ({"replication.policy.class": "Mine"}, "replication.policy.class must be"),
        ({"source.cluster.alias": "a.b"}, "free of the separator"),
        ({"target.cluster.alias": "source"}, "must differ"),
    ],
)
def test_bad_properties_name_what_is_wrong(properties: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        MirrorConfig.from_properties(properties)


def test_an_empty_exclude_list_excludes_nothing() -> None:
    topics = NameFilter.of("topics", ".*", "")
    assert topics.exclude is None and topics.matches("__consumer_offsets")


def test_properties_files_read_as_javas(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "# a comment\n"
        "! another\n"
        "\n"
        "topics = orders.*\n"
        "topics.exclude: .*[\\\\-\\\\.]internal, __.*\n"
        "groups billing\n"
        "source.cluster.alias=ea\\\n"
        "    st\n"
        "escaped\\=key=tab\\there\\u0041\n"
        "topics=orders,payments\n"
    )
    assert read_properties(path) == {
        "topics": "orders,payments",
        "topics.exclude": r".*[\-\.]internal, __.*",
        "groups": "billing",
        "source.cluster.alias": "east",
        "escaped=key": "tab\thereA",
    }
