"""A broker's Kafka services in one process, for fuzzing the dispatch layer without a cluster,
and requests answered with them as the listener answers them (`UnitWorld.answer`).

Broker 1's real ReplicaManager over logs in a temporary directory (`orders`: partition 0 led by
1 alone, 1 led by 1 with 2 in the ISR, 2 led by 2; `__consumer_offsets` led by 1), the real
GroupHandlers over one in-memory group shard that always leads, a producer id allocator over a
fake controller, and the real AdminForwarder whose controller cannot be reached: admin requests
are translated in full and then answered NOT_CONTROLLER, as a broker cut off from its quorum
answers. Waits run on the real clocks, so a request that never answers is a hang.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast
from uuid import UUID

from google.protobuf.message import Message

from pykraft.broker.admin_forwarding import AdminForwarder
from pykraft.broker.controller_channel import (
    ControllerCaller,
    ControllerUnavailableError,
    monotonic_ms,
)
from pykraft.broker.group.config import OFFSETS_TOPIC, GroupConfig
from pykraft.broker.group.handlers import GroupHandlers
from pykraft.broker.group.shard import GroupShard
from pykraft.broker.kafka.api import KafkaServices
from pykraft.broker.kafka.apis import ALL_APIS
from pykraft.broker.kafka.codec import SIZE, FrameError
from pykraft.broker.kafka.dispatch import Dispatcher
from pykraft.broker.kafka.fetch_frame import FetchFrame

from ...unit.broker.images import ORDERS_ID, topic_records
from ...unit.broker.kafka.data_path_calls import services
from ...unit.broker.kafka.group_harness import FakeCoordinator
from ...unit.broker.replica_harness import Harness, wall_clock_ms
from .answers import advertised_versions, served
from .requests import KafkaRequest, Vocabulary

OFFSETS_ID = UUID(int=7)
VOCABULARY = Vocabulary(
    topics=("orders", OFFSETS_TOPIC), topic_ids=(ORDERS_ID, OFFSETS_ID), groups=("fuzz-group",)
)
_TIMEOUT_MS = 1_000
HANG_S: Final = 10.0
WORKERS: Final = 4

DISPATCHER = Dispatcher(ALL_APIS)
SERVED = served(DISPATCHER)  # what the listener serves: (min, max) version by API key
ADVERTISED = advertised_versions(SERVED)  # every (key, version) of it


class _NoController:
    """A controller channel that never reaches a controller."""

    def call(self, method: str, request: Message, *args: Any, **kwargs: Any) -> Message:
        raise ControllerUnavailableError(f"no controller in this test ({method})")


@dataclass(frozen=True)
class UnitWorld:
    services: KafkaServices
    workers: ThreadPoolExecutor

    def answer(self, request: KafkaRequest) -> bytes | None:
        """The answer frame's payload as the listener would send it (None: no answer). The
        request must decode to what was sent; the answer must come within HANG_S."""
        frame = request.frame()
        try:
            call = DISPATCHER.decode(frame[SIZE.size :])
        except FrameError as error:
            raise AssertionError(f"a well-formed request refused: {error}") from error
        assert call.body == request.body, "the request decoded is not the request sent"
        pending = self.workers.submit(DISPATCHER.answer, call, self.services, "127.0.0.1")
        try:
            answer = pending.result(timeout=HANG_S)
        except FutureTimeout:
            raise AssertionError(f"no answer within {HANG_S}s") from None
        if isinstance(answer, FetchFrame):
            fetch_frame = answer
            try:
                answer = fetch_frame.to_bytes()
            finally:
                fetch_frame.close()
        if answer is None:
            return None
        (size,) = SIZE.unpack_from(answer)
        assert size == len(answer) - SIZE.size, f"size prefix {size}, {len(answer)} bytes"
        return answer[SIZE.size :]


@contextmanager
def unit_world(tmp_path: Path) -> Iterator[UnitWorld]:
    """The services (module docstring) and the threads that answer; the logs are closed on
    exit."""
    harness = Harness(tmp_path)
    try:
        harness.change(*topic_records(OFFSETS_TOPIC, OFFSETS_ID, [(1,)]))
        caller = cast(ControllerCaller, _NoController())
        groups = GroupHandlers(
            cast(Any, FakeCoordinator(GroupShard(GroupConfig()))),
            harness.manager,
            caller,
            may_serve=lambda now_ms: True,
            clock_ms=monotonic_ms,
            wall_clock_ms=wall_clock_ms,
            request_timeout_ms=_TIMEOUT_MS,
        )
        admin = AdminForwarder(caller, timeout_ms=_TIMEOUT_MS)
        kafka = services(harness.manager, tmp_path)
        with ThreadPoolExecutor(WORKERS, thread_name_prefix="fuzz-handler") as workers:
            yield UnitWorld(dataclasses.replace(kafka, groups=groups, admin=admin), workers)
    finally:
        harness.manager.close()
