"""The follower side of replication (Kafka's ReplicaFetcherManager and ReplicaFetcherThread).

One thread per leader broker fetches every partition this broker follows under that leader in
one Fetch request (one "session"), from each log's end, with the epoch of its last batch and the
partition's leader epoch. Fetched batches are appended as they are and the leader's high-water
mark taken (capped by the local log end). A `diverging_epoch` answer cuts the log where the
epochs part (`isr.truncation_offset`, never the stale high-water mark: KIP-101) and the next
fetch goes on from there; OFFSET_OUT_OF_RANGE below the leader's log start restarts the log at
that start. Any other partition error (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...) parks
the partition for `replica.fetch.backoff.ms` or until new metadata arrives. Replicas catching
up under a reassignment throttle fetch within its rate (`replication_throttle.py`).

`ReplicaFetcherManager.on_metadata()` starts, re-targets and stops threads as leadership moves.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final, NamedTuple

import grpc

from pykraft.broker import isr as isr_rules
from pykraft.broker.config import DATA_ENDPOINT_NAME
from pykraft.broker.follower_session import FetchState, FollowerSession
from pykraft.broker.leader_link import LeaderLink, LinkError
from pykraft.broker.log import LogError
from pykraft.broker.log.dir_checkpoints import DeferredWrites
from pykraft.broker.partition import Partition
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.broker.replication_throttle import FollowerThrottle
from pykraft.proto import broker_pb2, broker_pb2_grpc, common_pb2
from pykraft.server_common.grpc_server import open_peer_channel

log = logging.getLogger(__name__)

# Kafka's replica.fetch.* defaults (wait and backoff shortened: failover waits on the backoff).
REPLICA_FETCH_PARTITION_BYTES_MAX: Final = 1 << 20
REPLICA_FETCH_RESPONSE_BYTES_MAX: Final = 10 << 20
REPLICA_FETCH_WAIT_MS_MAX: Final = 500
REPLICA_FETCH_MIN_BYTES: Final = 1
REPLICA_FETCH_BACKOFF_MS: Final = 200
FETCH_TIMEOUT_EXTRA_MS: Final = 5000
FETCHER_JOIN_TIMEOUT_S: Final = 2.0
NOTED_PARTITIONS_MAX: Final = 5  # partitions a round's log line names per kind (all counted)

_Key = tuple[str, int]


class FollowerFetch:
    """One fetch request being built and, per partition in it, the partition and the leader
    epoch asked with; `throttled` are those counted against the throttle."""

    def __init__(self, request: broker_pb2.FetchRequest) -> None:
        self.request = request
        self.partitions: dict[_Key, tuple[Partition, int]] = {}
        self.throttled: set[_Key] = set()
        self.held_back = False  # throttled partitions left out until the bucket refills


class _RoundNotes:
    """What one fetcher round did to partitions beyond appending, by kind, for one INFO line
    per round: a metadata change may make thousands of partitions truncate or fail at once, and
    issue 18 §1.3 allows no line per partition at INFO (each one is at DEBUG)."""

    def __init__(self) -> None:
        self._by_kind: dict[str, list[str]] = {}

    def add(self, kind: str, partition: Partition, detail: object) -> None:
        named = f"{partition.topic}-{partition.partition} {detail}"
        log.debug("%s: %s", kind, named)
        self._by_kind.setdefault(kind, []).append(named)

    def log(self, leader_id: int) -> None:
        """One line for the round, naming at most NOTED_PARTITIONS_MAX partitions per kind."""
        if not self._by_kind:
            return
        kinds = []
        for kind, named in self._by_kind.items():
            shown = ", ".join(named[:NOTED_PARTITIONS_MAX])
            more = ", ..." if len(named) > NOTED_PARTITIONS_MAX else ""
            kinds.append(f"{len(named)} partitions {kind} ({shown}{more})")
        log.info("fetch from broker %d: %s", leader_id, "; ".join(kinds))


def _nothing_new(partition: Partition, result: broker_pb2.FetchPartitionResult) -> bool:
    """Whether an answer without records brings nothing to apply: no error, no divergence, a
    high-water mark the partition already holds."""
    return (
        result.error_code == common_pb2.NONE
        and result.high_watermark <= partition.high_watermark
        and not result.HasField("diverging_epoch")
    )


class FetcherThread:
    """Fetches the partitions led by one broker at one address."""

    def __init__(
        self,
        leader_id: int,
        address: str,
        manager: ReplicaManager,
        *,
        broker_id: int,
        broker_epoch: Callable[[], int],
        clock_ms: Callable[[], int],
        throttle: FollowerThrottle,
        data_address: str = "",
    ) -> None:
        self.leader_id = leader_id
        self._throttle = throttle
        self.address = address
        self._manager = manager
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._clock_ms = clock_ms
        self._keys: tuple[_Key, ...] = ()  # sorted
        self._session = FollowerSession()  # used by the thread only
        self._parked_until_ms: dict[_Key, int] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._channel = open_peer_channel(address)
        self._stub = broker_pb2_grpc.BrokerServiceStub(self._channel)  # type: ignore[no-untyped-call]
        # The leader's data plane listener, when it registered one: fetches go there.
        self._link = LeaderLink(data_address) if data_address else None
        self._thread = threading.Thread(
            target=self._run, name=f"replica-fetcher-{leader_id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def set_partitions(self, keys: frozenset[_Key]) -> None:
        """The partitions to fetch from now on; new metadata also unparks every partition."""
        with self._lock:
            self._keys = tuple(sorted(keys))
            self._parked_until_ms.clear()
        self._wake.set()

    def stop(self) -> None:
        """Stops the thread without waiting out a fetch in flight: closing the channel cancels
        it (a leader that stopped answering must not hold up the metadata listener)."""
        self._stop.set()
        self._wake.set()
        self._channel.close()
        if self._link is not None:
            self._link.close()
        if self._thread.is_alive():
            self._thread.join(timeout=FETCHER_JOIN_TIMEOUT_S)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            now_ms = self._clock_ms()
            fetch = self.build_request(now_ms)
            if not fetch.partitions:
                idle_ms = (
                    self._throttle.wait_ms(now_ms) if fetch.held_back else REPLICA_FETCH_BACKOFF_MS
                )
                self._wake.wait(min(idle_ms, REPLICA_FETCH_BACKOFF_MS) / 1000)
                continue
            timeout_s = (REPLICA_FETCH_WAIT_MS_MAX + FETCH_TIMEOUT_EXTRA_MS) / 1000
            try:
                if self._link is not None:
                    response = self._link.fetch(fetch.request, timeout_s)
                else:
                    response = self._stub.Fetch(fetch.request, timeout=timeout_s)
            except (grpc.RpcError, LinkError) as error:
                log.debug("fetch from broker %d failed: %s", self.leader_id, error)
                self._session.drop()
                self._wake.wait(REPLICA_FETCH_BACKOFF_MS / 1000)
                continue
            except ValueError:  # the channel was closed by `stop` between two fetches
                self._session.drop()
                continue
            self.apply_response(response, fetch)

    def _throttled_bytes_max(self, partition: Partition, now_ms: int) -> int | None:
        """The partition's fetch size under the throttle: None when not throttled, 0 while the
        throttle holds it back."""
        registration = partition.local.registration
        in_sync = self._broker_id in registration.isr
        image = self._manager.image
        if not self._throttle.throttled(image, partition.topic, partition.partition, in_sync):
            return None
        return self._throttle.fetch_bytes_max(image, now_ms)

    def build_request(self, now_ms: int) -> FollowerFetch:
        """The next request, of every followed partition not parked, the throttled ones only
        while the throttle allows (and then for a slice of its rate): in the fetch session
        (`FollowerSession`), it names only those whose fetch changed."""
        with self._lock:
            keys = self._keys
            parked = dict(self._parked_until_ms) if self._parked_until_ms else {}
        request = broker_pb2.FetchRequest(
            replica_id=self._broker_id,
            replica_epoch=self._broker_epoch(),
            max_wait_ms=REPLICA_FETCH_WAIT_MS_MAX,
            min_bytes=REPLICA_FETCH_MIN_BYTES,
            max_bytes=REPLICA_FETCH_RESPONSE_BYTES_MAX,
        )
        fetch = FollowerFetch(request)
        wanted: dict[_Key, FetchState] = {}
        for key in keys:
            partition = self._manager.partition(*key)
            if parked.get(key, 0) > now_ms or not self._follows(partition):
                continue
            assert partition is not None
            throttled_bytes_max = self._throttled_bytes_max(partition, now_ms)
            if throttled_bytes_max == 0:
                fetch.held_back = True
                continue
            if throttled_bytes_max is not None:
                fetch.throttled.add(key)
            state = wanted[key] = FetchState(
                current_leader_epoch=partition.leader_epoch,
                fetch_offset=partition.log_end_offset,
                last_fetched_epoch=partition.latest_epoch,
                log_start_offset=partition.log_start_offset,
                partition_max_bytes=min(
                    REPLICA_FETCH_PARTITION_BYTES_MAX,
                    throttled_bytes_max or REPLICA_FETCH_PARTITION_BYTES_MAX,
                ),
            )
            fetch.partitions[key] = (partition, state.current_leader_epoch)
        self._session.fill(request, wanted)
        if fetch.held_back:
            # Come back when the throttle refills rather than after a full long poll.
            request.max_wait_ms = min(REPLICA_FETCH_WAIT_MS_MAX, self._throttle.wait_ms(now_ms))
        return fetch

    def _follows(self, partition: Partition | None) -> bool:
        return (
            partition is not None
            and not partition.is_leader
            and partition.leader_id == self.leader_id
        )

    def apply_response(self, response: broker_pb2.FetchResponse, fetch: FollowerFetch) -> None:
        """Applies an answer to the partitions `fetch` asked for. Truncations only stage their
        lowered checkpoint offsets: the round writes each log directory's files once at its end
        (`DeferredWrites`, as Kafka's LogManager.truncateTo), while the truncated partitions
        still hold off role changes, so none takes a write as leader before its lowered offsets
        are stored. What happened beyond appends is logged in one line per round. An answer
        refusing the fetch session is not applied: the next request opens a new session."""
        if not self._session.answered(response):
            log.info(
                "fetch session with broker %d dropped: %s",
                self.leader_id,
                response.header.error_message,
            )
            return
        throttled_bytes = 0
        notes = _RoundNotes()
        deferred = DeferredWrites()
        failures: list[tuple[Path, OSError]] = []
        with contextlib.ExitStack() as truncated:  # their role locks, held until the write
            try:
                for topic in response.topics:
                    for result in topic.partitions:
                        key = (topic.topic, result.partition)
                        entry = fetch.partitions.get(key)
                        if entry is None:
                            continue
                        # Read once: every access of a bytes field copies it out of the message.
                        records = result.records
                        if key in fetch.throttled:
                            throttled_bytes += len(records)
                        if not records and _nothing_new(entry[0], result):
                            continue  # a caught-up poll of an idle partition: no role lock
                        held = self._apply_partition(*entry, result, records, deferred, notes)
                        if held is not None:
                            truncated.enter_context(held)
            finally:
                failures = self._manager.write_deferred(deferred)
        if failures:
            self._manager.fail_log_dirs(failures)
        notes.log(self.leader_id)
        if throttled_bytes:
            self._throttle.spend(throttled_bytes, self._clock_ms())

    def _apply_partition(
        self,
        partition: Partition,
        epoch: int,
        result: broker_pb2.FetchPartitionResult,
        records: bytes,
        deferred: DeferredWrites,
        notes: _RoundNotes,
    ) -> contextlib.ExitStack | None:
        """Applies one partition's answer under its role lock, and returns that lock still
        held when the answer truncated the log (released by the caller after the write)."""
        with contextlib.ExitStack() as role_held:
            if not role_held.enter_context(partition.following(self.leader_id, epoch)):
                return None  # leadership moved while the fetch was out
            try:
                if self._handle_partition(partition, result, records, deferred, notes):
                    return role_held.pop_all()
            except LogError as error:
                log.warning(
                    "%s-%d: cannot apply fetched data: %s",
                    partition.topic,
                    partition.partition,
                    error,
                )
                self._park((partition.topic, partition.partition))
        return None

    def _handle_partition(
        self,
        partition: Partition,
        result: broker_pb2.FetchPartitionResult,
        records: bytes,
        deferred: DeferredWrites,
        notes: _RoundNotes,
    ) -> bool:
        """Applies one partition's answer, whose `records` the caller read out of it (the
        partition wakes its own waiters); True when it truncated the log."""
        if result.error_code == common_pb2.OFFSET_OUT_OF_RANGE and (
            partition.log_end_offset < result.log_start_offset
        ):
            notes.add("restarted at the leader's log start", partition, result.log_start_offset)
            partition.truncate_fully_and_start_at(result.log_start_offset, deferred)
            return True
        if result.error_code != common_pb2.NONE:
            notes.add("fetch failed", partition, result.error_message)
            self._park((partition.topic, partition.partition))
        elif result.HasField("diverging_epoch"):
            self._truncate(partition, result.diverging_epoch, deferred, notes)
            return True
        elif records:
            partition.append_as_follower(records, leader_high_watermark=result.high_watermark)
        else:
            partition.take_leader_high_watermark(result.high_watermark)
        return False

    def _truncate(
        self,
        partition: Partition,
        diverging: broker_pb2.EpochEndOffset,
        deferred: DeferredWrites,
        notes: _RoundNotes,
    ) -> None:
        if diverging.epoch == isr_rules.UNDEFINED_EPOCH:
            offset = max(diverging.end_offset, 0)
            notes.add("the leader holds no epoch, restarted at", partition, offset)
            partition.truncate_fully_and_start_at(offset, deferred)
            return
        log_end_offset = partition.log_end_offset
        offset = isr_rules.truncation_offset(
            diverging=(diverging.epoch, diverging.end_offset),
            follower_answer=partition.end_offset_for_epoch(diverging.epoch),
            log_end_offset=log_end_offset,
        )
        notes.add(
            f"diverged from the leader at epoch {diverging.epoch}, truncated",
            partition,
            f"{log_end_offset} -> {offset}",
        )
        partition.truncate_to(offset, deferred)

    def _park(self, key: _Key) -> None:
        with self._lock:
            self._parked_until_ms[key] = self._clock_ms() + REPLICA_FETCH_BACKOFF_MS


class _Leader(NamedTuple):
    """A leader broker as registered: a new registration's addresses get a new thread."""

    leader_id: int
    address: str  # gRPC
    data_address: str  # its data plane listener's, "" when it has none


class ReplicaFetcherManager:
    """The fetcher threads of one broker, one per leader broker it follows."""

    def __init__(
        self,
        manager: ReplicaManager,
        *,
        broker_id: int,
        broker_epoch: Callable[[], int],
        clock_ms: Callable[[], int],
    ) -> None:
        self._manager = manager
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._clock_ms = clock_ms
        self._throttle = FollowerThrottle(broker_id)
        self._threads: dict[_Leader, FetcherThread] = {}
        self._lock = threading.Lock()
        self._closed = False

    def on_metadata(self) -> None:
        """Matches the threads to the partitions this broker now follows."""
        wanted = self._wanted()
        with self._lock:
            if self._closed:
                return
            stale = [key for key in self._threads if key not in wanted]
            retired = [self._threads.pop(key) for key in stale]
            for key, keys in wanted.items():
                thread = self._threads.get(key)
                if thread is None:
                    thread = self._threads[key] = FetcherThread(
                        key.leader_id,
                        key.address,
                        self._manager,
                        broker_id=self._broker_id,
                        broker_epoch=self._broker_epoch,
                        clock_ms=self._clock_ms,
                        throttle=self._throttle,
                        data_address=key.data_address,
                    )
                    thread.start()
                thread.set_partitions(keys)
        for thread in retired:
            thread.stop()

    def _wanted(self) -> dict[_Leader, frozenset[_Key]]:
        """A leader as registered -> the partitions followed under it."""
        image = self._manager.image
        by_leader: dict[_Leader, set[_Key]] = {}
        for partition in self._manager.partitions():
            leader_id = partition.leader_id
            if partition.is_leader or leader_id < 0:
                continue
            broker = image.cluster.broker(leader_id)
            if broker is None or not broker.endpoints:
                continue
            endpoint = broker.endpoints[0]
            data = next((e for e in broker.endpoints if e.name == DATA_ENDPOINT_NAME), None)
            leader = _Leader(
                leader_id,
                f"{endpoint.host}:{endpoint.port}",
                "" if data is None else f"{data.host}:{data.port}",
            )
            by_leader.setdefault(leader, set()).add((partition.topic, partition.partition))
        return {key: frozenset(keys) for key, keys in by_leader.items()}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads.values())
            self._threads.clear()
        for thread in threads:
            thread.stop()
