from __future__ import annotations

import pytest

from pykraft.metadata_log.configs import (
    BROKER_CONFIGS,
    BROKER_SYNONYMS,
    TOPIC_CONFIGS,
    config_default,
    config_definitions,
    validate_config,
)
from pykraft.metadata_log.errors import ConfigValidationError
from pykraft.metadata_log.records import ConfigResourceType

TOPIC = ConfigResourceType.TOPIC
BROKER = ConfigResourceType.BROKER
LONG_MAX = "9223372036854775807"

# Kafka's defaults, as the brief and Kafka 3.9's documentation give them.
KAFKA_TOPIC_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": LONG_MAX,
    "flush.ms": LONG_MAX,
    "index.interval.bytes": "4096",
    "max.compaction.lag.ms": LONG_MAX,
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": LONG_MAX,
    "message.timestamp.after.max.ms": LONG_MAX,
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
}
KAFKA_BROKER_DEFAULTS = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
    "log.retention.ms": "604800000",
    "log.retention.bytes": "-1",
    "log.segment.bytes": "1073741824",
    "log.flush.interval.messages": LONG_MAX,
    "log.flush.interval.ms": None,
    "log.cleanup.policy": "delete",
    "compression.type": "producer",
    "message.max.bytes": "1048588",
    "leader.replication.throttled.rate": LONG_MAX,
    "follower.replication.throttled.rate": LONG_MAX,
}


@pytest.mark.parametrize(
    ("resource_type", "defaults"),
    [(TOPIC, KAFKA_TOPIC_DEFAULTS), (BROKER, KAFKA_BROKER_DEFAULTS)],
)
def test_definitions_and_defaults_are_kafkas(
    resource_type: ConfigResourceType, defaults: dict[str, str | None]
) -> None:
    assert set(config_definitions(resource_type)) == set(defaults)
    for name, default in defaults.items():
        assert config_default(resource_type, name) == default, name
        if default is not None:
            assert validate_config(resource_type, name, default) == default, name


def test_definitions_know_their_own_names_and_are_documented() -> None:
    for definitions in (TOPIC_CONFIGS, BROKER_CONFIGS):
        for name, definition in definitions.items():
            assert definition.name == name
            assert definition.documentation.endswith(".")


def test_broker_synonyms_validate_like_their_topic_config() -> None:
    for broker_name, topic_name in BROKER_SYNONYMS.items():
        broker, topic = BROKER_CONFIGS[broker_name], TOPIC_CONFIGS[topic_name]
        assert (broker.type, broker.validator) == (topic.type, topic.validator)


@pytest.mark.parametrize(
    ("resource_type", "name", "value", "normal"),
    [
        (TOPIC, "retention.ms", " -1 ", "-1"),
        (TOPIC, "retention.ms", "+5", "5"),
        (TOPIC, "flush.messages", LONG_MAX, LONG_MAX),
        (TOPIC, "preallocate", "TRUE", "true"),
        (TOPIC, "cleanup.policy", " compact , delete", "compact,delete"),
        (TOPIC, "min.cleanable.dirty.ratio", "1", "1.0"),
        (TOPIC, "min.cleanable.dirty.ratio", ".25", "0.25"),
        (TOPIC, "min.cleanable.dirty.ratio", "1e-1", "0.1"),
        (TOPIC, "compression.type", "zstd", "zstd"),
        (TOPIC, "message.timestamp.type", "LogAppendTime", "LogAppendTime"),
        (TOPIC, "segment.bytes", "14", "14"),
        (BROKER, "num.partitions", "12", "12"),
        (BROKER, "log.flush.interval.ms", "0", "0"),
    ],
)
def test_valid_values_come_back_normalised(
    resource_type: ConfigResourceType, name: str, value: str, normal: str
) -> None:
    assert validate_config(resource_type, name, value) == normal


@pytest.mark.parametrize(
    ("resource_type", "name", "value", "message"),
    [
        (TOPIC, "retention.mss", "1", "Unknown topic config 'retention.mss'."),
        (BROKER, "retention.ms", "1", "Unknown broker config 'retention.ms'."),
        (TOPIC, "segment.ms", "abc", "Invalid value 'abc' for topic config 'segment.ms': not an"),
        (TOPIC, "segment.ms", "1_000", "not an integer"),
        (TOPIC, "segment.ms", "1.5", "not an integer"),
        (TOPIC, "segment.ms", "0", "must be at least 1."),
        (TOPIC, "retention.ms", "-2", "must be at least -1."),
        (TOPIC, "segment.bytes", "13", "must be at least 14."),
        (TOPIC, "segment.bytes", "2147483648", "out of the INT range"),
        (TOPIC, "flush.ms", "9223372036854775808", "out of the LONG range"),
        (TOPIC, "min.insync.replicas", "0", "must be at least 1."),
        (TOPIC, "min.cleanable.dirty.ratio", "1.5", "must be between 0 and 1."),
        (TOPIC, "min.cleanable.dirty.ratio", "nan", "not a finite number"),
        (TOPIC, "preallocate", "yes", "not a boolean"),
        (TOPIC, "compression.type", "brotli", "not one of uncompressed, zstd, lz4, snappy"),
        (TOPIC, "compression.type", "GZIP", "not one of"),
        (TOPIC, "message.timestamp.type", "create", "not one of CreateTime, LogAppendTime."),
        (TOPIC, "cleanup.policy", "", "must name one or more of delete, compact."),
        (TOPIC, "cleanup.policy", "delete,", "a list item is empty."),
        (TOPIC, "cleanup.policy", "delete,delete", "'delete' is repeated."),
        (TOPIC, "cleanup.policy", "delete,tidy", "'tidy' is not one of delete, compact."),
        (BROKER, "num.partitions", "0", "must be at least 1."),
    ],
)
def test_invalid_values_say_what_is_wrong_in_one_sentence(
    resource_type: ConfigResourceType, name: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigValidationError) as caught:
        validate_config(resource_type, name, value)
    text = str(caught.value)
    assert message in text
    assert text.endswith(".") and text.count(". ") == 0


def test_errors_are_value_errors_and_unknown_defaults_fail() -> None:
    assert issubclass(ConfigValidationError, ValueError)
    with pytest.raises(ConfigValidationError, match="Unknown topic config 'nope'"):
        config_default(TOPIC, "nope")
