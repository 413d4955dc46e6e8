"""Producer ids for idempotent producers: InitProducerId on the broker (Kafka's
RPCProducerIdManager, and the part of its transaction coordinator that serves producers
without a transactional id).

The active controller hands out ids in blocks (AllocateProducerIds, one ProducerIdsRecord in
the metadata log per block), so no id is ever given twice in the cluster. The broker takes ids
from its current block one at a time; when 90% of it is used it fetches the next block in the
background, and when the block runs out before that arrives, requests wait for it up to their
deadline. Fetches run on a background thread so that a slow or unreachable controller costs a
request no more than its deadline: it then answers COORDINATOR_NOT_AVAILABLE (retriable) with
why. After a failed fetch the next one waits PRODUCER_ID_FETCH_BACKOFF_MS.

InitProducerId, as Kafka answers a producer without a transactional id: a fresh id with epoch 0,
whatever id and epoch the request carries (KIP-360's bump is, for such a producer, a new id). A
transactional id is refused (INVALID_REQUEST): transactions are not supported yet. The broker
answers only while it may serve (unfenced and in touch with the controller quorum), else
COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar

from google.protobuf.message import Message

from pykraft.broker.controller_channel import ControllerUnavailableError
from pykraft.broker.waiting import wait_until
from pykraft.proto import broker_pb2, common_pb2, controller_pb2

log = logging.getLogger(__name__)

PRODUCER_ID_PREFETCH_PERCENT: Final = 90  # of a block used when the next one is fetched
PRODUCER_ID_FETCH_BACKOFF_MS: Final = 100
NEW_PRODUCER_EPOCH: Final = 0

_R = TypeVar("_R", bound=Message)


class ControllerCalls(Protocol):
    """What the allocator needs of `ControllerCaller` (tests pass a fake)."""

    def call(self, method: str, request: Message, response_type: type[_R], timeout_s: float) -> _R:
        """The active controller's answer; ControllerUnavailableError if none answered."""
        ...


class ProducerIdsUnavailableError(Exception):
    """No producer id could be handed out in time; the message says why."""


@dataclass(frozen=True)
class ProducerIdBlock:
    """Ids [start, start + length) for this broker alone."""

    start: int
    length: int

    @property
    def end(self) -> int:
        return self.start + self.length


def _start_thread(work: Callable[[], None]) -> None:
    threading.Thread(target=work, name="producer-ids", daemon=True).start()


class ProducerIdAllocator:
    """Hands out producer ids from blocks the controller allocates; thread-safe."""

    def __init__(
        self,
        caller: ControllerCalls,
        *,
        broker_id: int,
        broker_epoch: Callable[[], int],
        request_timeout_ms: int,
        clock_ms: Callable[[], int],
        run_in_background: Callable[[Callable[[], None]], None] = _start_thread,
    ) -> None:
        self._caller = caller
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._request_timeout_ms = request_timeout_ms
        self._clock_ms = clock_ms
        self._run_in_background = run_in_background
        self._changed = threading.Condition()
        self._block: ProducerIdBlock | None = None
        self._next_id = 0
        self._prefetched: ProducerIdBlock | None = None
        self._fetching = False
        self._fetches_done = 0  # counts finished fetches, so waiters see theirs end
        self._last_failure: str | None = None
        self._retry_at_ms = 0
        self._highest_end = 0  # ids below this were this broker's once: never again
        self._closed = False

    def next_id(self, *, deadline_ms: int) -> int:
        """A producer id no one else has or will have; ProducerIdsUnavailableError when none
        arrived from the controller by `deadline_ms` or its last fetch failed."""
        while True:
            with self._changed:
                produced, fetch = self._take(self._clock_ms())
                fetches_done = self._fetches_done
            if fetch:
                self._run_in_background(self._fetch)
            if produced is not None:
                return produced
            self._wait_for_fetch(fetches_done, deadline_ms)

    def _take(self, now_ms: int) -> tuple[int | None, bool]:
        """(an id or None, whether to start a fetch). Holds the lock."""
        exhausted = self._block is None or self._next_id >= self._block.end
        if exhausted and self._prefetched is not None:
            self._block, self._prefetched = self._prefetched, None
            self._next_id = self._block.start
        block = self._block
        if block is None or self._next_id >= block.end:
            if self._fetching:
                return None, False
            if self._closed:
                raise ProducerIdsUnavailableError("the broker is shutting down")
            if now_ms < self._retry_at_ms and self._last_failure is not None:
                raise ProducerIdsUnavailableError(self._last_failure)
            self._fetching = True
            return None, True
        produced = self._next_id
        self._next_id += 1
        used_percent = (self._next_id - block.start) * 100 // block.length
        prefetch = (
            used_percent >= PRODUCER_ID_PREFETCH_PERCENT
            and self._prefetched is None
            and not self._fetching
            and not self._closed
            and now_ms >= self._retry_at_ms
        )
        if prefetch:
            self._fetching = True
        return produced, prefetch

    def _wait_for_fetch(self, fetches_done: int, deadline_ms: int) -> None:
        """Waits until a fetch ends after `fetches_done` had. Returns if ids are there to take;
        raises when the deadline passes first, when that fetch failed, or when others took its
        ids and the deadline has passed (so the caller's loop ends by the deadline)."""
        with self._changed:
            if not wait_until(
                self._changed,
                lambda: self._fetches_done != fetches_done,
                deadline_ms=deadline_ms,
                clock_ms=self._clock_ms,
            ):
                raise ProducerIdsUnavailableError(
                    "no block of producer ids arrived from the controller in time"
                )
            if self._has_ids():
                return
            if self._last_failure is not None:
                raise ProducerIdsUnavailableError(self._last_failure)
            if self._clock_ms() >= deadline_ms:
                raise ProducerIdsUnavailableError("other requests took every producer id in time")

    def _has_ids(self) -> bool:
        in_block = self._block is not None and self._next_id < self._block.end
        return in_block or self._prefetched is not None

    def _fetch(self) -> None:
        """One AllocateProducerIds call (on a background thread); wakes every waiter."""
        try:
            block, failure = self._call_controller()
        except Exception as error:  # a bug: the waiters must still hear that it ended
            log.exception("fetching producer ids failed")
            block, failure = None, f"fetching producer ids failed: {error!r}"
        self._fetched(block, failure)

    def _call_controller(self) -> tuple[ProducerIdBlock | None, str | None]:
        request = controller_pb2.AllocateProducerIdsRequest(
            broker_id=self._broker_id, broker_epoch=self._broker_epoch()
        )
        try:
            response = self._caller.call(
                "AllocateProducerIds",
                request,
                controller_pb2.AllocateProducerIdsResponse,
                self._request_timeout_ms / 1000,
            )
        except ControllerUnavailableError as error:
            return None, f"the controller quorum could not allocate producer ids: {error}"
        header = response.header
        if header.error_code != common_pb2.NONE:
            name = common_pb2.ErrorCode.Name(header.error_code)
            return None, f"the controller refused producer ids: {name}: {header.error_message}"
        block = ProducerIdBlock(response.producer_id_start, response.producer_id_len)
        if block.start < 0 or block.length <= 0:
            return None, f"the controller sent an empty or negative block of producer ids {block}"
        return block, None

    def _fetched(self, block: ProducerIdBlock | None, failure: str | None) -> None:
        with self._changed:
            self._fetching = False
            self._fetches_done += 1
            if block is not None and block.start < self._highest_end:
                failure = f"the controller sent ids {block} below ids this broker had before"
                block = None
            if block is None:
                self._last_failure = failure
                self._retry_at_ms = self._clock_ms() + PRODUCER_ID_FETCH_BACKOFF_MS
                log.warning("no producer ids: %s", failure)
            else:
                self._last_failure = None
                self._highest_end = block.end
                if self._block is None or self._next_id >= self._block.end:
                    self._block, self._next_id = block, block.start
                else:
                    self._prefetched = block
            self._changed.notify_all()

    def close(self) -> None:
        """No fetch starts any more (a fetch under way ends by its own timeout)."""
        with self._changed:
            self._closed = True


def handle_init_producer_id(
    allocator: ProducerIdAllocator,
    request: broker_pb2.InitProducerIdRequest,
    *,
    broker_id: int,
    may_serve: bool,
    deadline_ms: int,
) -> broker_pb2.InitProducerIdResponse:
    """The answer to InitProducerId (module docstring)."""
    if request.transactional_id:
        return _error(common_pb2.INVALID_REQUEST, "transactions are not supported yet")
    if not may_serve:
        return _error(
            common_pb2.COORDINATOR_NOT_AVAILABLE,
            f"broker {broker_id} is fenced or out of touch with the controller quorum; retry",
        )
    try:
        producer_id = allocator.next_id(deadline_ms=deadline_ms)
    except ProducerIdsUnavailableError as error:
        return _error(
            common_pb2.COORDINATOR_NOT_AVAILABLE,
            f"broker {broker_id} has no producer id to give: {error}; retry",
        )
    return broker_pb2.InitProducerIdResponse(
        header=common_pb2.ResponseHeader(error_code=common_pb2.NONE),
        producer_id=producer_id,
        producer_epoch=NEW_PRODUCER_EPOCH,
    )


def _error(code: int, message: str) -> broker_pb2.InitProducerIdResponse:
    return broker_pb2.InitProducerIdResponse(
        header=common_pb2.ResponseHeader(error_code=code, error_message=message),  # type: ignore[arg-type]
        producer_id=-1,
        producer_epoch=-1,
    )
