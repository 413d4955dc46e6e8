"""LogConfig: Kafka's defaults, and reading topic config strings as the controller stores them."""

from __future__ import annotations

import pytest

from pykraft.broker.log import LogConfig
from pykraft.metadata_log.configs import LONG_MAX, TOPIC_CONFIGS
from pykraft.metadata_log.errors import ConfigValidationError
from pykraft.proto.record_batch import TimestampType


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1 << 30 and config.segment_ms == 7 * 24 * 3600 * 1000
    assert config.index_interval_bytes == 4096 and config.segment_index_bytes == 10 << 20
    assert config.retention_bytes == -1 and config.max_message_bytes == 1048588
    assert config.flush_messages == LONG_MAX and config.flush_ms == LONG_MAX
    assert config.cleanup_policy == ("delete",) and config.deletes_old_segments


def test_every_default_agrees_with_the_controllers_topic_configs() -> None:
    from_defaults = LogConfig.from_topic_configs(
        {name: d.default for name, d in TOPIC_CONFIGS.items() if d.default is not None}
    )
    assert from_defaults == LogConfig()


def test_topic_overrides_are_read() -> None:
    config = LogConfig.from_topic_configs(
        {
            "segment.bytes": " 2048 ",
            "retention.ms": "-1",
            "cleanup.policy": "compact",
            "message.timestamp.type": "LogAppendTime",
            "min.insync.replicas": "2",  # not a log setting: ignored
        }
    )
    assert config.segment_bytes == 2048 and config.retention_ms == -1
    assert config.cleanup_policy == ("compact",) and not config.deletes_old_segments
    assert config.message_timestamp_type is TimestampType.LOG_APPEND_TIME


@pytest.mark.parametrize(
    "configs", [{"segment.bytes": "lots"}, {"segment.bytes": "1"}, {"no.such.config": "1"}]
)
def test_values_kafka_would_refuse_are_refused(configs: dict[str, str]) -> None:
    with pytest.raises(ConfigValidationError):
        LogConfig.from_topic_configs(configs)
