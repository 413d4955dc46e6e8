"""Producer ids on the broker: blocks from the controller (a fake ControllerCaller: the allocator
is pure logic around it), prefetching, failures and deadlines, concurrent callers, and the
InitProducerId answers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar, cast

import grpc
import pytest
from google.protobuf.message import Message

from pykraft.broker.config import BrokerConfig
from pykraft.broker.controller_channel import ControllerUnavailableError, monotonic_ms
from pykraft.broker.group.handlers import GroupHandlers
from pykraft.broker.producer_ids import (
    PRODUCER_ID_FETCH_BACKOFF_MS,
    ProducerIdAllocator,
    ProducerIdsUnavailableError,
    handle_init_producer_id,
)
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.broker.service import BrokerService
from pykraft.proto import broker_pb2, common_pb2, controller_pb2
from tests.waiting import wait_until

_R = TypeVar("_R", bound=Message)
DEADLINE_S = 10.0
BROKER_ID = 3
BROKER_EPOCH = 17


class FakeController:
    """Answers AllocateProducerIds with consecutive blocks of `block_length` from 1000; can be
    made unreachable, refusing, or slow (held until `release`)."""

    def __init__(self, block_length: int = 10) -> None:
        self.block_length = block_length
        self.next_start = 1000
        self.requests: list[controller_pb2.AllocateProducerIdsRequest] = []
        self.answered = 0
        self.unreachable = False
        self.refusal = common_pb2.NONE
        self.held = threading.Event()
        self.held.set()
        self._lock = threading.Lock()

    def call(self, method: str, request: Message, response_type: type[_R], timeout_s: float) -> _R:
        assert method == "AllocateProducerIds"
        assert response_type is controller_pb2.AllocateProducerIdsResponse
        assert isinstance(request, controller_pb2.AllocateProducerIdsRequest)
        with self._lock:
            self.requests.append(request)
        assert self.held.wait(DEADLINE_S), "the test never released the controller"
        with self._lock:
            self.answered += 1
            if self.unreachable:
                raise ControllerUnavailableError("no active controller answered")
            if self.refusal != common_pb2.NONE:
                header = common_pb2.ResponseHeader(
                    error_code=self.refusal,
                    error_message="Broker epoch 17 is stale.",
                )
                return cast(_R, controller_pb2.AllocateProducerIdsResponse(header=header))
            start, length = self.next_start, self.block_length
            self.next_start += length
        response = controller_pb2.AllocateProducerIdsResponse(
            header=common_pb2.ResponseHeader(), producer_id_start=start, producer_id_len=length
        )
        return cast(_R, response)


class FakeClock:
    def __init__(self) -> None:
        self.now_ms = 1_000_000

    def __call__(self) -> int:
        return self.now_ms


def run_now(work: Callable[[], None]) -> None:
    work()


def allocator(
    controller: FakeController,
    clock_ms: Callable[[], int],
    run_in_background: Callable[[Callable[[], None]], None] = run_now,
) -> ProducerIdAllocator:
    return ProducerIdAllocator(
        controller,
        broker_id=BROKER_ID,
        broker_epoch=lambda: BROKER_EPOCH,
        request_timeout_ms=1000,
        clock_ms=clock_ms,
        run_in_background=run_in_background,
    )


def test_ids_come_from_the_controllers_blocks_one_after_another() -> None:
    controller, clock = FakeController(block_length=10), FakeClock()
    ids = allocator(controller, clock)
    taken = [ids.next_id(deadline_ms=clock.now_ms + 1000) for _ in range(25)]
    assert taken == [*range(1000, 1025)]
    assert {(r.broker_id, r.broker_epoch) for r in controller.requests} == {
        (BROKER_ID, BROKER_EPOCH)
    }


def test_the_next_block_is_fetched_once_ninety_percent_is_used() -> None:
    controller, clock = FakeController(block_length=10), FakeClock()
    ids = allocator(controller, clock)
    for _ in range(8):
        ids.next_id(deadline_ms=clock.now_ms + 1000)
    assert len(controller.requests) == 1
    ids.next_id(deadline_ms=clock.now_ms + 1000)  # the ninth of ten
    assert len(controller.requests) == 2
    assert ids.next_id(deadline_ms=clock.now_ms + 1000) == 1009
    assert ids.next_id(deadline_ms=clock.now_ms + 1000) == 1010, "from the prefetched block"
    assert len(controller.requests) == 2


def test_an_unreachable_controller_fails_fast_and_is_retried_after_the_backoff() -> None:
    controller, clock = FakeController(), FakeClock()
    controller.unreachable = True
    ids = allocator(controller, clock)
    with pytest.raises(ProducerIdsUnavailableError, match="no active controller answered"):
        ids.next_id(deadline_ms=clock.now_ms + 1000)
    with pytest.raises(ProducerIdsUnavailableError, match="no active controller answered"):
        ids.next_id(deadline_ms=clock.now_ms + 1000)
    assert len(controller.requests) == 1, "no new attempt within the backoff"
    controller.unreachable = False
    clock.now_ms += PRODUCER_ID_FETCH_BACKOFF_MS
    assert ids.next_id(deadline_ms=clock.now_ms + 1000) == 1000
    assert len(controller.requests) == 2


def test_a_refusal_by_the_controller_is_named() -> None:
    controller, clock = FakeController(), FakeClock()
    controller.refusal = common_pb2.STALE_BROKER_EPOCH
    ids = allocator(controller, clock)
    with pytest.raises(ProducerIdsUnavailableError, match="STALE_BROKER_EPOCH: Broker epoch"):
        ids.next_id(deadline_ms=clock.now_ms + 1000)


def test_a_block_below_ids_already_handed_out_is_refused() -> None:
    controller, clock = FakeController(block_length=2), FakeClock()
    ids = allocator(controller, clock)
    assert ids.next_id(deadline_ms=clock.now_ms + 1000) == 1000
    controller.next_start = 1000  # a controller that forgot its allocation
    assert ids.next_id(deadline_ms=clock.now_ms + 1000) == 1001  # and fetches the next block
    with pytest.raises(ProducerIdsUnavailableError, match="below ids this broker had"):
        ids.next_id(deadline_ms=clock.now_ms + 1000)


def test_a_slow_controller_costs_a_request_no_more_than_its_deadline() -> None:
    controller = FakeController()
    controller.held.clear()
    ids = allocator(controller, monotonic_ms, run_in_background=_in_a_thread)
    started = time.monotonic()
    with pytest.raises(ProducerIdsUnavailableError, match="in time"):
        ids.next_id(deadline_ms=monotonic_ms() + 100)
    assert 0.09 <= time.monotonic() - started < DEADLINE_S / 2
    controller.held.set()
    wait_until(lambda: controller.answered == 1, "the held fetch to end")
    assert ids.next_id(deadline_ms=monotonic_ms()) == 1000, "the block arrived meanwhile"
    assert len(controller.requests) == 1


def _in_a_thread(work: Callable[[], None]) -> None:
    threading.Thread(target=work, daemon=True).start()


def test_concurrent_callers_never_get_the_same_id() -> None:
    controller = FakeController(block_length=7)
    ids = allocator(controller, monotonic_ms, run_in_background=_in_a_thread)
    taken: list[int] = []
    lock = threading.Lock()

    def take() -> None:
        for _ in range(40):
            produced = ids.next_id(deadline_ms=monotonic_ms() + int(DEADLINE_S * 1000))
            with lock:
                taken.append(produced)

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S)
        assert not thread.is_alive()
    assert len(taken) == len(set(taken)) == 320
    assert min(taken) >= 1000 and max(taken) < controller.next_start


def test_a_closed_allocator_fetches_no_more() -> None:
    controller, clock = FakeController(block_length=2), FakeClock()
    ids = allocator(controller, clock)
    assert ids.next_id(deadline_ms=clock.now_ms + 1000) == 1000
    ids.close()
    assert ids.next_id(deadline_ms=clock.now_ms + 1000) == 1001, "the block is still used"
    with pytest.raises(ProducerIdsUnavailableError, match="shutting down"):
        ids.next_id(deadline_ms=clock.now_ms + 1000)
    assert len(controller.requests) == 1


# --- InitProducerId ---


def init(
    ids: ProducerIdAllocator,
    *,
    may_serve: bool = True,
    transactional_id: str = "",
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> broker_pb2.InitProducerIdResponse:
    request = broker_pb2.InitProducerIdRequest(
        transactional_id=transactional_id,
        transaction_timeout_ms=60_000,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )
    return handle_init_producer_id(
        ids, request, broker_id=BROKER_ID, may_serve=may_serve, deadline_ms=monotonic_ms() + 1000
    )


def test_init_producer_id_gives_a_fresh_id_with_epoch_zero() -> None:
    ids = allocator(FakeController(), monotonic_ms)
    first = init(ids)
    assert (first.header.error_code, first.producer_id, first.producer_epoch) == (0, 1000, 0)
    bumped = init(ids, producer_id=first.producer_id, producer_epoch=first.producer_epoch)
    assert (bumped.header.error_code, bumped.producer_id, bumped.producer_epoch) == (0, 1001, 0)


@pytest.mark.parametrize(
    ("arguments", "unreachable", "code", "message"),
    [
        ({"transactional_id": "tx-1"}, False, common_pb2.INVALID_REQUEST,
         "transactions are not supported yet"),
        ({"may_serve": False}, False, common_pb2.COORDINATOR_NOT_AVAILABLE,
         "broker 3 is fenced or out of touch with the controller quorum; retry"),
        ({}, True, common_pb2.COORDINATOR_NOT_AVAILABLE,
         "broker 3 has no producer id to give: the controller quorum could not allocate"),
    ],
)  # fmt: skip
def test_init_producer_id_errors(
    arguments: dict[str, Any], unreachable: bool, code: int, message: str
) -> None:
    controller = FakeController()
    controller.unreachable = unreachable
    response = init(allocator(controller, monotonic_ms), **arguments)
    assert response.header.error_code == code
    assert message in response.header.error_message
    assert (response.producer_id, response.producer_epoch) == (-1, -1)
    assert len(controller.requests) == (1 if unreachable else 0)


class _Aborted(Exception):
    pass


class FakeContext:
    """The parts of grpc.ServicerContext the service uses."""

    def __init__(self, remaining_s: float | None = None) -> None:
        self.remaining_s = remaining_s
        self.aborted: tuple[grpc.StatusCode, str] | None = None

    def time_remaining(self) -> float | None:
        return self.remaining_s

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        self.aborted = (code, details)
        raise _Aborted(details)


def test_the_service_bounds_init_producer_id_by_the_callers_deadline(tmp_path: Path) -> None:
    config = BrokerConfig(
        node_id=BROKER_ID,
        listener="127.0.0.1:9191",
        log_dirs=(tmp_path,),
        controller_bootstrap_servers=("127.0.0.1:9091",),
        request_timeout_ms=30_000,
    )
    controller = FakeController()
    controller.held.clear()
    ids = allocator(controller, monotonic_ms, run_in_background=_in_a_thread)
    service = BrokerService(
        ReplicaManager(config, lambda now_ms: True),
        config,
        monotonic_ms,
        wall_clock_ms=monotonic_ms,  # no appends in this test
        producer_ids=ids,
        may_serve=lambda now_ms: True,
        groups=cast(GroupHandlers, object()),  # no group calls in this test
    )
    started = time.monotonic()
    response = service.InitProducerId(
        broker_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1),
        cast(grpc.ServicerContext, FakeContext(remaining_s=0.1)),
    )
    assert time.monotonic() - started < DEADLINE_S / 2, "not the 30 s request timeout"
    assert response.header.error_code == common_pb2.COORDINATOR_NOT_AVAILABLE
    controller.held.set()
