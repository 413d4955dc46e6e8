"""Which source topics are mirrored, and what the target needs for them: topics created with
the source's partitions and configs, grown, and their configs kept in sync (issue 15 §2.2)."""

from __future__ import annotations

from pykraft.client import ConfigSource, ConfigValue, NewTopic, PartitionInfo, TopicDescription
from pykraft.client import TopicPartition as TP
from pykraft.mirror.config import MirrorConfig
from pykraft.mirror.topic_sync import config_changes, mirrored_topics, plan_topics

CONFIG = MirrorConfig.from_properties({"source.cluster.alias": "east", "replication.factor": "3"})
POLICY = CONFIG.policy()


def set_on_topic(value: str) -> ConfigValue:
    return ConfigValue(value, ConfigSource.DYNAMIC_TOPIC_CONFIG, False, False, "STRING")


def default(value: str) -> ConfigValue:
    return ConfigValue(value, ConfigSource.DEFAULT_CONFIG, True, False, "STRING")


def topic(name: str, partitions: int, **configs: ConfigValue) -> TopicDescription:
    infos = [PartitionInfo(p, 1, 0, [1], [1]) for p in range(partitions)]
    named = {k.replace("_", "."): v for k, v in configs.items()}
    return TopicDescription(name, f"id-{name}", infos, named)


def test_internal_excluded_and_cyclic_topics_are_not_mirrored() -> None:
    source = [
        topic("orders", 1),
        topic("__consumer_offsets", 1),
        topic(".hidden", 1),
        topic("east.checkpoints.internal", 1),
        topic("target.orders", 1),  # came from the target: a cycle
        topic("west.orders", 1),  # came from elsewhere: mirrored on
    ]
    assert [t.name for t in mirrored_topics(source, CONFIG, POLICY)] == ["orders", "west.orders"]


def test_a_missing_topic_is_created_with_the_configs_set_on_the_source() -> None:
    orders = topic(
        "orders",
        3,
        retention_ms=set_on_topic("1000"),
        min_insync_replicas=set_on_topic("2"),  # config.properties.exclude names it
        segment_bytes=default("1073741824"),  # a default: the target keeps its own
    )
    plan = plan_topics([orders], {}, CONFIG, POLICY)
    assert plan.create == [NewTopic("east.orders", 3, 3, {"retention.ms": "1000"})]
    assert plan.grow == {} and plan.ready == {}  # ready once it exists


def test_a_short_topic_grows_and_its_existing_partitions_are_ready() -> None:
    plan = plan_topics(
        [topic("orders", 3)], {"east.orders": topic("east.orders", 2)}, CONFIG, POLICY
    )
    assert plan.create == []
    assert plan.grow == {"east.orders": 3}
    assert plan.ready == {
        TP("orders", 0): TP("east.orders", 0),
        TP("orders", 1): TP("east.orders", 1),
    }


def test_a_longer_target_topic_is_left_as_it_is() -> None:
    plan = plan_topics(
        [topic("orders", 1)], {"east.orders": topic("east.orders", 4)}, CONFIG, POLICY
    )
    assert plan.grow == {} and plan.ready == {TP("orders", 0): TP("east.orders", 0)}


def test_config_changes_set_what_differs_and_leave_the_rest() -> None:
    source = {
        "retention.ms": set_on_topic("2000"),
        "cleanup.policy": set_on_topic("compact"),
        "message.timestamp.type": set_on_topic("LogAppendTime"),  # excluded
    }
    target = {
        "retention.ms": set_on_topic("1000"),
        "cleanup.policy": default("compact"),
        "max.message.bytes": set_on_topic("5"),  # not on the source: left alone, as MM2 does
    }
    assert config_changes(source, target, CONFIG.config_filter()) == {"retention.ms": "2000"}
