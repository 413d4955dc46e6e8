"""The Kafka admin APIs against the controller's own decisions (quorum/controller), in process.

The fake controller here runs the real decision functions on an image and applies their records,
so these tests check the translation keeps the controller's meaning: defaults for -1, sources,
DELETE falling back to the default, topics gone after DeleteTopics.
"""

from __future__ import annotations

import uuid
from typing import Any

from google.protobuf.message import Message
from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.apis import configs, topics
from pykraft.metadata_log import replay_all
from pykraft.metadata_log.image import MetadataImage
from pykraft.proto import admin_pb2
from pykraft.quorum.controller.configs import describe_configs, incremental_alter_configs
from pykraft.quorum.controller.result import ControllerResult
from pykraft.quorum.controller.topics import create_topics, delete_topics
from tests.unit.broker.kafka.admin_wire import TIMEOUT, FakeAdmin, context
from tests.unit.broker.kafka.kio_wire import request_types, through_the_wire
from tests.unit.broker.kafka.test_kafka_cluster import IMAGE

CREATE, DELETE, _ = topics.APIS
DESCRIBE, ALTER = configs.APIS
TOPIC = admin_pb2.CONFIG_RESOURCE_TOPIC


class InProcessController(FakeAdmin):
    """Answers as the active controller would, keeping the image its records make."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        super().__init__(
            CreateTopics=self._create,
            DeleteTopics=lambda r: self._write(delete_topics(self.image, r)),
            IncrementalAlterConfigs=lambda r: self._write(incremental_alter_configs(self.image, r)),
            DescribeConfigs=lambda r: describe_configs(self.image, r),
        )

    def _create(self, request: admin_pb2.CreateTopicsRequest) -> Message:
        return self._write(create_topics(self.image, request, new_topic_id=uuid.uuid4))

    def _write(self, result: ControllerResult[Message]) -> Message:
        offset = self.image.offset + 1
        self.image = replay_all(self.image, result.records).apply(offset=offset, epoch=1)
        return result.response


def _retention_ms(controller: InProcessController) -> Any:
    module = request_types(DESCRIBE.key, 4)
    resource = module.DescribeConfigsResource(
        resource_type=TOPIC, resource_name="t", configuration_keys=("retention.ms",)
    )
    request = module.DescribeConfigsRequest(resources=(resource,))
    (result,) = through_the_wire(DESCRIBE, context(4, controller), request).results
    (entry,) = result.configs
    return entry


def test_create_describe_alter_and_delete_a_topic() -> None:
    controller = InProcessController(IMAGE)
    module = request_types(CREATE.key, 5)
    topic = module.CreatableTopic(
        name="t",
        num_partitions=-1,
        replication_factor=-1,
        assignments=(),
        configs=(module.CreatableTopicConfig(name="retention.ms", value="1000"),),
    )
    request = module.CreateTopicsRequest(topics=(topic,), timeout=TIMEOUT)
    (created,) = through_the_wire(CREATE, context(5, controller), request).topics
    assert (created.error_code, created.num_partitions, created.replication_factor) == (
        ErrorCode.none,
        1,
        1,
    )
    sources = {c.name: (c.value, c.config_source) for c in created.configs}
    assert sources["retention.ms"] == ("1000", admin_pb2.CONFIG_SOURCE_DYNAMIC_TOPIC)
    assert sources["cleanup.policy"] == ("delete", admin_pb2.CONFIG_SOURCE_DEFAULT)
    assert _retention_ms(controller).config_source == admin_pb2.CONFIG_SOURCE_DYNAMIC_TOPIC

    alter = request_types(ALTER.key, 1)
    delete_retention = alter.AlterConfigsResource(
        resource_type=TOPIC,
        resource_name="t",
        configs=(alter.AlterableConfig(name="retention.ms", config_operation=1, value=None),),
    )
    altered = alter.IncrementalAlterConfigsRequest(
        resources=(delete_retention,), validate_only=False
    )
    (result,) = through_the_wire(ALTER, context(1, controller), altered).responses
    assert result.error_code == ErrorCode.none
    assert _retention_ms(controller).config_source == admin_pb2.CONFIG_SOURCE_DEFAULT

    deleting = request_types(DELETE.key, 4).DeleteTopicsRequest(topic_names=("t",), timeout=TIMEOUT)
    (deleted,) = through_the_wire(DELETE, context(4, controller), deleting).responses
    assert deleted.error_code == ErrorCode.none
    assert controller.image.topics.get_by_name("t") is None
