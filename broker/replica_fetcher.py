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

import logging
import threading
from collections.abc import Callable
from typing import Final

import grpc

from pykraft.broker import isr as isr_rules
from pykraft.broker.log import LogError
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

_Key = tuple[str, int]


class _Fetch:
    """One fetch request being built and, per partition in it, the partition and the leader
    epoch asked with; `throttled` are those counted against the throttle."""

    def __init__(self, request: broker_pb2.FetchRequest) -> None:
        self.request = request
        self.partitions: dict[_Key, tuple[Partition, int]] = {}
        self.throttled: set[_Key] = set()
        self.held_back = False  # throttled partitions left out until the bucket refills


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
    ) -> None:
        self.leader_id = leader_id
        self._throttle = throttle
        self.address = address
        self._manager = manager
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._clock_ms = clock_ms
        self._keys: frozenset[_Key] = frozenset()
        self._parked_until_ms: dict[_Key, int] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._channel = open_peer_channel(address)
        self._stub = broker_pb2_grpc.BrokerServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._thread = threading.Thread(
            target=self._run, name=f"replica-fetcher-{leader_id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def set_partitions(self, keys: frozenset[_Key]) -> None:
        """The partitions to fetch from now on; new metadata also unparks every partition."""
        with self._lock:
            self._keys = keys
            self._parked_until_ms.clear()
        self._wake.set()

    def stop(self) -> None:
        """Stops the thread without waiting out a fetch in flight: closing the channel cancels
        it (a leader that stopped answering must not hold up the metadata listener)."""
        self._stop.set()
        self._wake.set()
        self._channel.close()
        if self._thread.is_alive():
            self._thread.join(timeout=FETCHER_JOIN_TIMEOUT_S)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            now_ms = self._clock_ms()
            fetch = self._build_request(now_ms)
            if not fetch.partitions:
                idle_ms = (
                    self._throttle.wait_ms(now_ms) if fetch.held_back else REPLICA_FETCH_BACKOFF_MS
                )
                self._wake.wait(min(idle_ms, REPLICA_FETCH_BACKOFF_MS) / 1000)
                continue
            timeout_s = (REPLICA_FETCH_WAIT_MS_MAX + FETCH_TIMEOUT_EXTRA_MS) / 1000
            try:
                response = self._stub.Fetch(fetch.request, timeout=timeout_s)
            except grpc.RpcError as error:
                log.debug("fetch from broker %d failed: %s", self.leader_id, error)
                self._wake.wait(REPLICA_FETCH_BACKOFF_MS / 1000)
                continue
            except ValueError:  # the channel was closed by `stop` between two fetches
                continue
            self._handle_response(response, fetch)

    def _throttled_bytes_max(self, partition: Partition, now_ms: int) -> int | None:
        """The partition's fetch size under the throttle: None when not throttled, 0 while the
        throttle holds it back."""
        registration = partition.local.registration
        in_sync = self._broker_id in registration.isr
        image = self._manager.image
        if not self._throttle.throttled(image, partition.topic, partition.partition, in_sync):
            return None
        return self._throttle.fetch_bytes_max(image, now_ms)

    def _build_request(self, now_ms: int) -> _Fetch:
        """The next request: every followed partition not parked, the throttled ones only while
        the throttle allows (and then for a slice of its rate)."""
        with self._lock:
            keys = sorted(self._keys)
            parked = dict(self._parked_until_ms)
        request = broker_pb2.FetchRequest(
            replica_id=self._broker_id,
            replica_epoch=self._broker_epoch(),
            max_wait_ms=REPLICA_FETCH_WAIT_MS_MAX,
            min_bytes=REPLICA_FETCH_MIN_BYTES,
            max_bytes=REPLICA_FETCH_RESPONSE_BYTES_MAX,
        )
        fetch = _Fetch(request)
        topics: dict[str, broker_pb2.FetchTopic] = {}
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
            topic = topics.get(key[0])
            if topic is None:
                topic = topics[key[0]] = request.topics.add(topic=key[0])
            topic.partitions.add(
                partition=key[1],
                current_leader_epoch=partition.leader_epoch,
                fetch_offset=partition.log_end_offset,
                last_fetched_epoch=partition.latest_epoch,
                log_start_offset=partition.log_start_offset,
                partition_max_bytes=min(
                    REPLICA_FETCH_PARTITION_BYTES_MAX,
                    throttled_bytes_max or REPLICA_FETCH_PARTITION_BYTES_MAX,
                ),
            )
            fetch.partitions[key] = (partition, partition.leader_epoch)
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

    def _handle_response(self, response: broker_pb2.FetchResponse, fetch: _Fetch) -> None:
        throttled_bytes = 0
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
                partition, epoch = entry
                with partition.following(self.leader_id, epoch) as still_following:
                    if not still_following:
                        continue  # leadership moved while the fetch was out
                    try:
                        self._handle_partition(partition, result, records)
                    except LogError as error:
                        log.warning("%s-%d: cannot apply fetched data: %s", *key, error)
                        self._park(key)
        if throttled_bytes:
            self._throttle.spend(throttled_bytes, self._clock_ms())

    def _handle_partition(
        self, partition: Partition, result: broker_pb2.FetchPartitionResult, records: bytes
    ) -> None:
        """Applies one partition's answer, whose `records` the caller read out of it (the
        partition wakes its own waiters)."""
        key = (partition.topic, partition.partition)
        if result.error_code == common_pb2.OFFSET_OUT_OF_RANGE and (
            partition.log_end_offset < result.log_start_offset
        ):
            log.info(
                "%s-%d: restarting at the leader's log start %d", *key, result.log_start_offset
            )
            partition.truncate_fully_and_start_at(result.log_start_offset)
        elif result.error_code != common_pb2.NONE:
            log.info("%s-%d: fetch failed: %s", *key, result.error_message)
            self._park(key)
        elif result.HasField("diverging_epoch"):
            self._truncate(partition, result.diverging_epoch)
        elif records:
            partition.append_as_follower(records, leader_high_watermark=result.high_watermark)
        else:
            partition.take_leader_high_watermark(result.high_watermark)

    def _truncate(self, partition: Partition, diverging: broker_pb2.EpochEndOffset) -> None:
        name = f"{partition.topic}-{partition.partition}"
        if diverging.epoch == isr_rules.UNDEFINED_EPOCH:
            log.info("%s: the leader holds no epoch; restarting at %d", name, diverging.end_offset)
            partition.truncate_fully_and_start_at(max(diverging.end_offset, 0))
            return
        log_end_offset = partition.log_end_offset
        offset = isr_rules.truncation_offset(
            diverging=(diverging.epoch, diverging.end_offset),
            follower_answer=partition.end_offset_for_epoch(diverging.epoch),
            log_end_offset=log_end_offset,
        )
        log.info(
            "%s: diverged from the leader at epoch %d; truncating %d -> %d",
            name,
            diverging.epoch,
            log_end_offset,
            offset,
        )
        partition.truncate_to(offset)

    def _park(self, key: _Key) -> None:
        with self._lock:
            self._parked_until_ms[key] = self._clock_ms() + REPLICA_FETCH_BACKOFF_MS


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
        self._threads: dict[tuple[int, str], FetcherThread] = {}
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
                        key[0],
                        key[1],
                        self._manager,
                        broker_id=self._broker_id,
                        broker_epoch=self._broker_epoch,
                        clock_ms=self._clock_ms,
                        throttle=self._throttle,
                    )
                    thread.start()
                thread.set_partitions(keys)
        for thread in retired:
            thread.stop()

    def _wanted(self) -> dict[tuple[int, str], frozenset[_Key]]:
        """(leader id, its address) -> the partitions followed under it."""
        image = self._manager.image
        by_leader: dict[tuple[int, str], set[_Key]] = {}
        for partition in self._manager.partitions():
            leader_id = partition.leader_id
            if partition.is_leader or leader_id < 0:
                continue
            broker = image.cluster.broker(leader_id)
            if broker is None or not broker.endpoints:
                continue
            endpoint = broker.endpoints[0]
            address = f"{endpoint.host}:{endpoint.port}"
            by_leader.setdefault((leader_id, address), set()).add(
                (partition.topic, partition.partition)
            )
        return {key: frozenset(keys) for key, keys in by_leader.items()}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads.values())
            self._threads.clear()
        for thread in threads:
            thread.stop()
