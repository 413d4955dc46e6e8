"""The context the Kafka admin handlers' tests call them in (through `kio_wire`), with a fake
controller: `FakeAdmin` stands in for `AdminForwarder`, each forwarded call recorded and answered
by the test's function for that method.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from google.protobuf.message import Message
from kio.static.primitive import i32Timedelta

from pykraft.broker.config import BrokerConfig
from pykraft.broker.kafka.api import KafkaServices, RequestContext
from pykraft.metadata_log.image import MetadataImage

TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=5))


class FakeAdmin:
    """Answers `forward(method, request)` with `answers[method](request)`; records the calls."""

    def __init__(self, **answers: Callable[[Any], Message]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, Any]] = []

    def forward(self, method: str, request: Message) -> Message:
        self.calls.append((method, request))
        return self.answers[method](request)


def context(
    version: int, admin: FakeAdmin | None = None, image: MetadataImage = MetadataImage.EMPTY
) -> RequestContext:
    config = BrokerConfig(
        node_id=2,
        listener="127.0.0.1:9291",
        log_dirs=(Path("/nonexistent"),),
        controller_bootstrap_servers=("127.0.0.1:9290",),
        cluster_id="test-cluster",
    )
    services = KafkaServices(
        config=config,
        manager=cast(Any, SimpleNamespace(image=image)),
        groups=cast(Any, None),
        producer_ids=cast(Any, None),
        admin=cast(Any, admin),
        clock_ms=lambda: 0,
        wall_clock_ms=lambda: 0,
        may_serve=lambda now_ms: True,
    )
    return RequestContext(services, version, "test-client", "127.0.0.1")
