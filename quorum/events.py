"""What goes into `ControllerCore.step` and what comes out: typed events and the `Output`.

Requests come from clients (through the driver's queue): a write carries the decide function that
turns the image into a `ControllerResult`, a read a function of the committed state, a metadata
fetch the offset it reads after. Raft reports come from the log: an append's outcome, the log's
status after a poll. A `Tick` only lets time pass, so timers fire.

Every request is answered exactly once, by an `Answer` carrying its `request_id`. The answer of a
write with records comes only after those records committed (or, NOT_CONTROLLER, once this node
can no longer know their fate). A request that waited in the queue past its deadline is answered
with no response: its caller has already returned REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from pykraft.metadata_log.image import MetadataImage
from pykraft.quorum.batch import QuorumBatch
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.controller.heartbeats import HeartbeatTracker
from pykraft.quorum.controller.result import ControllerResult
from pykraft.quorum.metadata_fetch import FetchPlan
from pykraft.quorum.raft.api import AppendError, RaftStatus

IdSource = Callable[[], uuid.UUID]  # production passes uuid.uuid4; the simulation a seeded one


@dataclass(frozen=True)
class DecideContext:
    """What a write's decide function may read (and the broker sessions it may touch). Valid only
    inside the `step` that decides."""

    image: MetadataImage  # the pending image: committed state plus this controller's writes
    next_offset: int
    now_ms: int
    cluster_id: str
    heartbeats: HeartbeatTracker
    new_topic_id: IdSource


@dataclass(frozen=True)
class ReadContext:
    """What a read may see: the committed image and the quorum's state."""

    image: MetadataImage
    raft: RaftStatus
    config: ControllerConfig
    active_controller_id: int


Decide = Callable[[DecideContext], ControllerResult[Any]]
Read = Callable[[ReadContext], Message]


@dataclass(frozen=True)
class WriteRequest:
    request_id: int
    response_cls: type[Message]
    deadline_ms: int  # not decided after this: the caller has given up
    decide: Decide


@dataclass(frozen=True)
class ReadRequest:
    request_id: int
    response_cls: type[Message]
    deadline_ms: int
    read: Read


@dataclass(frozen=True)
class FetchRequest:
    """A MetadataFetch, parked until a record past `after_offset` commits or `deadline_ms`."""

    request_id: int
    response_cls: type[Message]
    deadline_ms: int
    after_offset: int
    allow_standby: bool


@dataclass(frozen=True)
class AppendDone:
    """The Raft log's outcome for the append of `Append.append_id`: the state machine's result
    once it committed and applied here, or why it did not."""

    append_id: int
    result: object | None
    error: AppendError | None


@dataclass(frozen=True)
class RaftPolled:
    """The log's status after a poll: who leads which term."""

    status: RaftStatus


@dataclass(frozen=True)
class Tick:
    """Nothing but time passing: timers due by `now_ms` fire."""


@dataclass(frozen=True)
class Stop:
    """The node stops: parked and later requests are answered NOT_CONTROLLER with `reason`."""

    reason: str


Request = WriteRequest | ReadRequest | FetchRequest
Event = Request | AppendDone | RaftPolled | Tick | Stop


@dataclass(frozen=True)
class Append:
    """A batch to append to the Raft log as `payload` (`batch.encode()`'s bytes); its outcome
    comes back as `AppendDone(append_id)`. `batch.epoch` is the epoch it was decided in.
    `request_ids` name the writes whose records these are, in order (empty for a LEADER_CHANGE;
    a write the controller decided for itself has no id)."""

    append_id: int
    batch: QuorumBatch
    request_ids: tuple[int, ...]
    payload: bytes


@dataclass(frozen=True)
class Answer:
    """The one answer to request `request_id`; None when it expired in the queue. A metadata
    fetch that is not refused is answered with its `FetchPlan`, which the caller's thread turns
    into the stream of answer messages."""

    request_id: int
    response: Message | FetchPlan | None


@dataclass
class Output:
    """What one `step` asks the driver to do, in order: append, answer, and step a `Tick` again
    no later than `wake_at_ms` (None: no timer is due)."""

    appends: list[Append] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    wake_at_ms: int | None = None
