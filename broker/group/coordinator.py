"""The group coordinator of one broker: it serves the groups whose `__consumer_offsets`
partition this broker leads (Kafka's GroupCoordinatorService and CoordinatorRuntime).

- Leadership: `on_metadata` loads a shard for every offsets partition this broker now leads
  (in a loader thread: it replays the partition's log, then answers; meanwhile requests get
  COORDINATOR_LOAD_IN_PROGRESS) and drops shards it no longer leads (NOT_COORDINATOR).
- Writes: under the shard's lock a decision is taken, its records are appended as one batch
  (acks=all semantics), then the answer waits, outside the lock, until the high watermark
  covers everything the shard has written so far: nobody is ever told of state that a
  leader change could undo. A failed append drops the shard and loads it again from the log;
  leadership lost while waiting answers NOT_COORDINATOR; a timeout
  (offsets.commit.timeout.ms) answers COORDINATOR_NOT_AVAILABLE, which clients retry.
- Timers: one thread expires members (session and rebalance timeouts) every
  EXPIRY_CHECK_INTERVAL_MS and offsets every offsets.retention.check.interval.ms.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Final, TypeVar

from pykraft.broker.group.config import OFFSETS_TOPIC, GroupConfig
from pykraft.broker.group.records import (
    GroupRecord,
    RecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from pykraft.broker.group.shard import GroupShard
from pykraft.broker.group.shard_state import Decision
from pykraft.broker.log import LogError
from pykraft.broker.partition import AckState
from pykraft.broker.partition_watches import COMMITTED
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.metadata_log import MetadataImage
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import BatchBuilder, decode_batch, iter_batches
from pykraft.server_common.errors import ApiError

log = logging.getLogger(__name__)

EXPIRY_CHECK_INTERVAL_MS: Final = 250
# A load reads the log in chunks of this many bytes.
LOAD_READ_BYTES_MAX: Final = 4 * 1024 * 1024
# Records of one decision go out in one batch; a decision larger than this is split.
BATCH_RECORDS_MAX: Final = 10_000

T = TypeVar("T")
R = TypeVar("R")


class CoordinatorError(ApiError):
    """This broker cannot serve the group now; `error_code` tells the client what to do. Kept
    apart from the log's errors, which the coordinator turns into one of these."""


class _ShardState(Enum):
    LOADING = "loading"
    ACTIVE = "active"


@dataclass(eq=False)
class _Shard:
    index: int
    leader_epoch: int
    shard: GroupShard
    state: _ShardState = _ShardState.LOADING
    lock: threading.Lock = field(default_factory=threading.Lock)
    written_end_offset: int = 0  # the log end offset after this shard's last append


def partition_for(group_id: str, partitions: int) -> int:
    """The offsets partition of a group: Java's String.hashCode, made non-negative as Kafka's
    Utils.abs does, modulo the partition count, so a group lands where Kafka would put it."""
    h = 0
    for unit in _utf16_units(group_id):
        h = (31 * h + unit) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % partitions


def _utf16_units(text: str) -> Iterator[int]:
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        yield (data[i] << 8) | data[i + 1]


class GroupCoordinator:
    """See the module docstring. Thread-safe."""

    def __init__(
        self,
        manager: ReplicaManager,
        config: GroupConfig,
        *,
        clock_ms: Callable[[], int],
        wall_clock_ms: Callable[[], int],
    ) -> None:
        self._manager = manager
        self.config = config
        self._clock_ms = clock_ms
        self._wall_clock_ms = wall_clock_ms
        self._shards: dict[int, _Shard] = {}
        self._lock = threading.Lock()
        self._loads: queue.SimpleQueue[_Shard | None] = queue.SimpleQueue()
        self._stopped = threading.Event()
        self._topics_cache: tuple[MetadataImage, dict[str, int]] | None = None
        self._threads = [
            threading.Thread(target=self._load_loop, name="group-loader", daemon=True),
            threading.Thread(target=self._timer_loop, name="group-timers", daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        self._stopped.set()
        self._loads.put(None)
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=5)

    # --- leadership ---

    def on_metadata(self) -> None:
        """Loads shards for offsets partitions this broker newly leads, drops the others."""
        led: dict[int, int] = {}
        for partition in self._manager.partitions():
            if partition.topic == OFFSETS_TOPIC and partition.is_leader:
                led[partition.partition] = partition.leader_epoch
        with self._lock:
            for index in [i for i, s in self._shards.items() if led.get(i) != s.leader_epoch]:
                log.info("%s-%d: no longer coordinating its groups", OFFSETS_TOPIC, index)
                del self._shards[index]
            for index, epoch in led.items():
                if index not in self._shards:
                    self._schedule_load(index, epoch)

    def _schedule_load(self, index: int, epoch: int) -> None:
        """Call with `_lock` held."""
        shard = _Shard(index, epoch, GroupShard(self.config))
        self._shards[index] = shard
        self._loads.put(shard)

    def _load_loop(self) -> None:
        while (shard := self._loads.get()) is not None:
            try:
                self._load(shard)
            except (LogError, RecordError) as error:
                log.error("%s-%d: cannot load groups: %s", OFFSETS_TOPIC, shard.index, error)
                with self._lock:
                    if self._shards.get(shard.index) is shard:
                        del self._shards[shard.index]

    def _load(self, shard: _Shard) -> None:
        partition = self._manager.partition(OFFSETS_TOPIC, shard.index)
        if partition is None or not partition.leads_in(shard.leader_epoch):
            return
        offset = partition.log_start_offset
        end = partition.log_end_offset
        count = 0
        while offset < end:
            read = partition.read(offset, bytes_max=LOAD_READ_BYTES_MAX, upper_offset=end)
            if not read.data:
                break
            for position, _ in iter_batches(read.data):
                for record in decode_batch(read.data, position, verify=False):
                    if record.key is not None:
                        key = decode_key(record.key)
                        shard.shard.replay(GroupRecord(key, decode_value(key, record.value)))
                        count += 1
            offset = read.next_offset
        with shard.lock:
            shard.shard.loaded(self._clock_ms(), self._wall_clock_ms())
            shard.written_end_offset = end
            shard.state = _ShardState.ACTIVE
        log.info(
            "%s-%d: loaded %d groups from %d records (offsets up to %d)",
            OFFSETS_TOPIC,
            shard.index,
            len(shard.shard.groups),
            count,
            end,
        )

    # --- serving ---

    def topics(self) -> dict[str, int]:
        """Partition counts of every topic in the broker's current metadata."""
        image = self._manager.image
        cached = self._topics_cache
        if cached is None or cached[0] is not image:
            counts = {topic.name: len(topic.partitions) for topic in image.topics.by_id.values()}
            self._topics_cache = cached = (image, counts)
        return cached[1]

    def run(self, group_id: str, decide: Callable[[GroupShard], Decision[R]]) -> R:
        """Runs `decide` on the group's shard, writes its records, and returns its answer once
        they and everything before them are replicated; CoordinatorError otherwise."""
        shard = self._shard_for(group_id)
        with shard.lock:
            self._check_active(shard)
            decision = decide(shard.shard)
            if decision.records:
                self._append(shard, decision.records)
            end_offset = shard.written_end_offset
        self._await_replicated(shard, end_offset)
        return decision.response

    def read(self, group_id: str, read: Callable[[GroupShard], R]) -> R:
        """`read` on the group's shard, answered once what it may have seen is replicated."""
        return self.run(group_id, lambda shard: Decision([], read(shard)))

    def each_shard(self, read: Callable[[GroupShard], T]) -> list[T]:
        """`read` on every active shard (ListGroups)."""
        with self._lock:
            shards = list(self._shards.values())
        answers = []
        for shard in shards:
            with shard.lock:
                if shard.state is _ShardState.ACTIVE:
                    answers.append(read(shard.shard))
        return answers

    def _shard_for(self, group_id: str) -> _Shard:
        index = partition_for(group_id, self._offsets_partition_count())
        with self._lock:
            shard = self._shards.get(index)
        if shard is None:
            raise CoordinatorError(
                common_pb2.NOT_COORDINATOR,
                f"this broker does not lead {OFFSETS_TOPIC}-{index}, so it is not the "
                f"coordinator of group {group_id!r}",
            )
        return shard

    def _offsets_partition_count(self) -> int:
        count = self.topics().get(OFFSETS_TOPIC)
        if not count:
            raise CoordinatorError(
                common_pb2.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} does not exist yet"
            )
        return count

    def _check_active(self, shard: _Shard) -> None:
        with self._lock:
            current = self._shards.get(shard.index) is shard
        if not current:
            raise CoordinatorError(
                common_pb2.NOT_COORDINATOR, f"{OFFSETS_TOPIC}-{shard.index} moved to another broker"
            )
        if shard.state is _ShardState.LOADING:
            raise CoordinatorError(
                common_pb2.COORDINATOR_LOAD_IN_PROGRESS,
                f"{OFFSETS_TOPIC}-{shard.index} is being loaded",
            )

    def _append(self, shard: _Shard, records: list[GroupRecord]) -> None:
        """Appends under the shard's lock; on failure the shard is loaded again from the log
        (its in-memory state already holds the records) and CoordinatorError is raised."""
        partition = self._manager.partition(OFFSETS_TOPIC, shard.index)
        try:
            if partition is None:
                raise LogError(common_pb2.NOT_LEADER_OR_FOLLOWER, "the partition is gone")
            for start in range(0, len(records), BATCH_RECORDS_MAX):
                # The log's time is the wall clock (LogAppendTime, timestamp checks, segment
                # age), as for produce; the monotonic clock only times waits and sessions.
                wall_ms = self._wall_clock_ms()
                batch = _batch(records[start : start + BATCH_RECORDS_MAX], wall_ms)
                appended = partition.append_as_leader(batch, acks=-1, now_ms=wall_ms)
                if appended.leader_epoch != shard.leader_epoch:
                    raise LogError(common_pb2.NOT_LEADER_OR_FOLLOWER, "a new leader epoch")
                shard.written_end_offset = appended.info.last_offset + 1
        except LogError as error:
            self._reload(shard)
            raise CoordinatorError(
                common_pb2.NOT_COORDINATOR,
                f"the group state could not be written to {OFFSETS_TOPIC}-{shard.index}: "
                f"{error}; find the coordinator again",
            ) from None

    def _reload(self, shard: _Shard) -> None:
        with self._lock:
            if self._shards.get(shard.index) is not shard:
                return
            del self._shards[shard.index]
            partition = self._manager.partition(OFFSETS_TOPIC, shard.index)
            if partition is not None and partition.leads_in(shard.leader_epoch):
                self._schedule_load(shard.index, shard.leader_epoch)

    def _await_replicated(self, shard: _Shard, end_offset: int) -> None:
        """Waits until the high watermark covers `end_offset`, deciding each wake-up in one
        step (`Partition.ack_state`) so a leader change cannot fall between the reads."""
        partition = self._manager.partition(OFFSETS_TOPIC, shard.index)
        deadline_ms = self._clock_ms() + self.config.commit_timeout_ms

        def replicated() -> bool:
            state = (
                AckState.LOST
                if partition is None
                else partition.ack_state(shard.leader_epoch, end_offset)
            )
            if state is AckState.LOST:
                raise CoordinatorError(
                    common_pb2.NOT_COORDINATOR,
                    f"leadership of {OFFSETS_TOPIC}-{shard.index} moved before the group "
                    "state was replicated; find the coordinator again",
                )
            return state is AckState.DONE

        if not self._manager.watches.wait_until(
            [(OFFSETS_TOPIC, shard.index)],
            replicated,
            deadline_ms=deadline_ms,
            clock_ms=self._clock_ms,
            interest=COMMITTED,
        ):
            raise CoordinatorError(
                common_pb2.COORDINATOR_NOT_AVAILABLE,
                f"the in-sync replicas of {OFFSETS_TOPIC}-{shard.index} did not "
                f"confirm the group state within {self.config.commit_timeout_ms} ms",
            )

    # --- timers ---

    def _timer_loop(self) -> None:
        next_offsets_check_ms = self._clock_ms() + self.config.offsets_retention_check_interval_ms
        while not self._stopped.wait(EXPIRY_CHECK_INTERVAL_MS / 1000):
            now_ms = self._clock_ms()
            check_offsets = now_ms >= next_offsets_check_ms
            if check_offsets:
                next_offsets_check_ms = now_ms + self.config.offsets_retention_check_interval_ms
            with self._lock:
                shards = list(self._shards.values())
            for shard in shards:
                self._expire(shard, check_offsets)

    def _expire(self, shard: _Shard, check_offsets: bool) -> None:
        topics = self.topics()
        with shard.lock:
            if shard.state is not _ShardState.ACTIVE:
                return
            now_ms, wall_ms = self._clock_ms(), self._wall_clock_ms()
            records = shard.shard.expire(topics, now_ms, wall_ms, offsets=check_offsets)
            if records:
                with contextlib.suppress(CoordinatorError):
                    self._append(shard, records)


def _batch(records: list[GroupRecord], wall_ms: int) -> bytes:
    builder = BatchBuilder()
    for record in records:
        builder.append(wall_ms, encode_key(record.key), encode_value(record))
    return builder.build()
