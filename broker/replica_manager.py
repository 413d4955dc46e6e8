"""The partitions this broker hosts, kept in step with the metadata, and the leader's side of
Produce, Fetch and ListOffsets (Kafka's ReplicaManager).

`on_metadata(delta, image)` is the metadata follower's listener: it deletes, creates and updates
exactly the partitions `local_changes` names, under `<log dir>/<topic>-<partition>`, with the
topic's LogConfig (broker defaults, then cluster-wide broker overrides, then topic overrides).

A storage error while a log is opened takes its log directory offline (`log_dirs`): the
replicas in it are closed and listed by `offline_replicas`, which the heartbeat sends so the
controller moves their leadership and ISR; the broker serves the rest, and fails (`failure`)
only once every directory has.

Every request goes through `leader` (or `replica`, for the consumer reads any replica may
serve, KIP-392), which `replica_lookup` mixes in with `preferred_read_replica`: each says which
hosted partition serves it, or raises the LeaderError clients act on; `counters` counts what was
served.
Requests that wait on partitions (Fetch long polls, acks=all produce, the group coordinator's
wait for its writes) wait on `watches` (`partition_watches`): each `Partition` signals its key
when its log end, high-water mark or role changes (the `on_change` it is given is `notify` of
its key), and this manager signals every watch on a metadata change, so only the waits on the
partition that changed (or all, on a metadata change) wake. Other waits (the coordinator's
start-up) wait on the condition variable `changed`, which `notify` signals on every change.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import shutil
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Final
from uuid import UUID

from pykraft.broker.config import BrokerConfig
from pykraft.broker.counters import ISR_EXPANDS_TOTAL, ISR_SHRINKS_TOTAL, Counters
from pykraft.broker.fetch_sessions import FetchSessions
from pykraft.broker.local_changes import LocalChanges, LocalPartition, local_changes
from pykraft.broker.log import LogConfig, LogError, PartitionLog
from pykraft.broker.log.dir_checkpoints import DeferredWrites, LogDirCheckpoints
from pykraft.broker.log_dirs import LogDirs, StorageError
from pykraft.broker.log_maintenance import LogMaintenance
from pykraft.broker.partition import Partition
from pykraft.broker.partition_watches import Change, PartitionWatches
from pykraft.broker.recovery_threads import RecoveryThreads
from pykraft.broker.replica_lookup import ReplicaLookup
from pykraft.metadata_log import (
    BROKER_SYNONYMS,
    MetadataDelta,
    MetadataImage,
    PartitionRegistration,
)
from pykraft.metadata_log.records import ConfigResourceType
from pykraft.proto import common_pb2
from pykraft.server_common.durable_files import sync_filesystem
from pykraft.server_common.slots import Slots

log = logging.getLogger(__name__)

VALID_ACKS: Final = frozenset({0, 1, -1})
# The cluster-wide default entity of broker configs, as Kafka names it.
CLUSTER_DEFAULT_BROKER: Final = ""


class ReplicaManager(ReplicaLookup):
    """Hosted partitions by (topic, partition), and the data-plane requests on them."""

    def __init__(
        self,
        config: BrokerConfig,
        may_serve: Callable[[int], bool],
        wall_clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self._config = config
        self._broker_id = config.node_id
        self._may_serve = may_serve
        self._image = MetadataImage.EMPTY
        # The unfenced brokers' racks of one cluster image, for rack-aware fetches: rebuilt only
        # when the image's cluster changes, not per partition per fetch.
        self._racks: tuple[object, dict[int, str]] = (None, {})
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._log_dirs = LogDirs(config.log_dirs, on_failure=self._take_offline)
        self._recovery_threads = RecoveryThreads(
            config.num_recovery_threads_per_data_dir * len(config.log_dirs)
        )
        # Each log directory's offset checkpoint files, read when it first gets a partition.
        self._checkpoints: dict[Path, LogDirCheckpoints] = {}
        # Replicas of this broker whose log directory failed: their registration and why.
        self._offline: dict[tuple[str, int], tuple[LocalPartition, str]] = {}
        # Set when every log directory has failed: the broker can serve nothing and must stop.
        self.failure: StorageError | None = None
        self._lock = threading.Lock()
        # Signalled by the partitions' changes and on metadata changes (see the module doc).
        self.changed = threading.Condition()
        self._version = 0
        self.watches = PartitionWatches()
        self.fetch_sessions = FetchSessions(self.watches)  # followers' (KIP-227)
        # A parked fetch holds a request thread while it waits: at most this many may (the
        # listeners' pools have that many threads beyond those for short requests), so idle
        # consumers long-polling never take the threads produce and metadata requests need.
        self.fetch_waits = Slots(config.fetch_waits_max)
        # What the request handlers served (Kafka's ReplicaManager keeps BrokerTopicStats).
        self.counters = Counters()
        self.maintenance = LogMaintenance(
            lambda: [p.log for p in self.partitions()],
            wall_clock_ms=wall_clock_ms,
            retention_check_interval_ms=config.log_retention_check_interval_ms,
            cleaner_backoff_ms=config.log_cleaner_backoff_ms,
            checkpoint=self.checkpoint,
            checkpoint_interval_ms=config.log_flush_offset_checkpoint_interval_ms,
        )

    @property
    def image(self) -> MetadataImage:
        return self._image

    def partition(self, topic: str, partition: int) -> Partition | None:
        with self._lock:
            return self._partitions.get((topic, partition))

    def partitions(self) -> list[Partition]:
        with self._lock:
            return list(self._partitions.values())

    # --- metadata ---

    def on_metadata(self, delta: MetadataDelta | None, image: MetadataImage, now_ms: int) -> None:
        """Acts on the change from the current image to `image` (see module doc). The logs of
        new partitions are opened without the lock (files and fsyncs, per partition: the
        heartbeat, which reads `offline_replicas`, must not wait for thousands of them)."""
        previous = self._image
        changes = local_changes(previous, image, self._broker_id, delta)
        with self._lock:
            for key in changes.deletes:  # first: a topic created again reuses the names
                self._delete(key)
        with self._lock:  # placed in order, so where each goes does not depend on the threads
            placed = [
                (local, checkpoints)
                for local in (*changes.leaders, *changes.followers)
                if (local.topic, local.partition) not in self._partitions
                and (checkpoints := self._place(local)) is not None
            ]
        logs = self._recovery_threads.run(lambda item: self._open_log(*item, image, now_ms), placed)
        opened = {
            (local.topic, local.partition): log_
            for (local, _), log_ in zip(placed, logs, strict=True)
        }
        with self._lock:
            self._apply(changes, image, opened, now_ms)
            if image.configs is not previous.configs:
                self._reconfigure(image, changes, now_ms)
            self._image = image
        self.notify()

    def _apply(
        self,
        changes: LocalChanges,
        image: MetadataImage,
        opened: dict[tuple[str, int], PartitionLog | None],
        now_ms: int,
    ) -> None:
        for local in (*changes.leaders, *changes.followers):
            configs = self._topic_configs(image, local.topic)
            min_insync = int(configs.get("min.insync.replicas", "1"))
            key = (local.topic, local.partition)
            existing = self._partitions.get(key)
            if existing is None:
                existing = self._host(local, opened.get(key), min_insync, now_ms)
                if existing is None:
                    continue
            self._count_isr_change(existing.local.registration, local.registration)
            existing.update(local, min_insync_replicas=min_insync, now_ms=now_ms)
            leader = "this broker" if existing.is_leader else f"broker {existing.leader_id}"
            log.debug(
                "%s: led by %s in epoch %d", local.directory_name, leader, existing.leader_epoch
            )
        if not changes.empty:
            log.info("metadata at offset %d: %s", image.offset, changes.summary())

    def _count_isr_change(self, old: PartitionRegistration, new: PartitionRegistration) -> None:
        """Counts an ISR change of a partition this broker leads before and after (its own
        AlterPartition, or the controller's removal of a fenced replica); one that both removes
        and adds members counts as both."""
        if not old.leader == new.leader == self._broker_id:
            return
        if set(old.isr) - set(new.isr):
            self.counters.add(ISR_SHRINKS_TOTAL)
        if set(new.isr) - set(old.isr):
            self.counters.add(ISR_EXPANDS_TOTAL)

    def _place(self, local: LocalPartition) -> LogDirCheckpoints | None:
        """The checkpoints of the log directory for the partition's log; None, with the replica
        offline, if it is offline (or every one is, or its checkpoint files cannot be read).
        Hold the lock."""
        key = (local.topic, local.partition)
        if key in self._offline:
            self._offline[key] = (local, self._offline[key][1])
            return None
        try:
            log_dir = self._log_dirs.dir_for(local.directory_name)
        except StorageError as error:
            self._offline[key] = (local, str(error))
            return None
        if log_dir not in self._checkpoints:
            try:
                self._checkpoints[log_dir] = LogDirCheckpoints(log_dir)
            except OSError as error:
                self._offline[key] = (local, self._log_dirs.fail(log_dir, error))
                return None
        return self._checkpoints[log_dir]

    def _open_log(
        self,
        local: LocalPartition,
        checkpoints: LogDirCheckpoints,
        image: MetadataImage,
        now_ms: int,
    ) -> PartitionLog | None:
        """Opens (or creates) the partition's log in the log directory of `checkpoints`,
        without the lock; None, with the replica offline, if that fails (which takes the whole
        directory offline)."""
        configs = self._topic_configs(image, local.topic)
        log_dir = checkpoints.log_dir
        try:
            return PartitionLog.open(
                log_dir / local.directory_name,
                LogConfig.from_topic_configs(configs),
                now_ms=now_ms,
                checkpoints=checkpoints,
            )
        except (OSError, LogError) as error:
            if isinstance(error, LogError) and error.error_code != common_pb2.KAFKA_STORAGE_ERROR:
                raise
            with self._lock:
                self._offline[(local.topic, local.partition)] = (
                    local,
                    self._log_dirs.fail(log_dir, error),
                )
            return None

    def _host(
        self, local: LocalPartition, log_: PartitionLog | None, min_insync: int, now_ms: int
    ) -> Partition | None:
        """Hosts the partition on its opened log; None if it has none or its directory went
        offline meanwhile (the log is then closed and the replica offline). Hold the lock."""
        if log_ is None:
            return None
        key = (local.topic, local.partition)
        reason = self._log_dirs.offline_reason(log_.directory.parent)
        if reason is not None:
            with contextlib.suppress(OSError, LogError):
                log_.close()
            self._offline[key] = (local, reason)
            return None
        self.maintenance.track(log_)
        partition = Partition(
            local,
            log_,
            broker_id=self._broker_id,
            min_insync_replicas=min_insync,
            now_ms=now_ms,
            on_change=functools.partial(self.notify, key),
            last_fetch_ms=self.fetch_sessions.last_fetch_ms,
        )
        self._partitions[key] = partition
        return partition

    def _take_offline(self, log_dir: Path, reason: str) -> None:
        """`log_dir` failed: every replica in it goes offline (their waits end LOST, nothing
        more is read or acknowledged from them). Called with `_lock` held."""
        for key, partition in list(self._partitions.items()):
            if partition.log.directory.parent != log_dir:
                continue
            del self._partitions[key]
            self.maintenance.untrack(partition.log)
            partition.detach()
            with contextlib.suppress(OSError, LogError):
                partition.log.close()
            self._offline[key] = (partition.local, reason)
        if self._log_dirs.all_offline:
            self.failure = StorageError(
                f"every log directory has failed: {self._log_dirs.reasons()}"
            )

    def offline_replicas(self) -> dict[UUID, list[int]]:
        """This broker's replicas that cannot be served (their log directory failed), by topic
        id, for the heartbeat that has the controller move their leadership and ISR. A log
        that went offline by itself (a write failed and could not be undone) takes its
        directory offline here first, as Kafka's log dir failure channel does."""
        with self._lock:
            for partition in list(self._partitions.values()):
                if partition.log.failure is not None:
                    self._log_dirs.fail(partition.log.directory.parent, partition.log.failure)
            found: dict[UUID, list[int]] = {}
            for local, _ in self._offline.values():
                found.setdefault(local.topic_id, []).append(local.partition)
            return {topic_id: sorted(partitions) for topic_id, partitions in found.items()}

    def _reconfigure(self, image: MetadataImage, changes: LocalChanges, now_ms: int) -> None:
        """Applies changed topic or broker configs to partitions the change did not touch."""
        touched = {(p.topic, p.partition) for p in (*changes.leaders, *changes.followers)}
        for key, partition in self._partitions.items():
            if key in touched:
                continue
            configs = self._topic_configs(image, partition.topic)
            partition.log.update_config(LogConfig.from_topic_configs(configs))
            self.maintenance.track(partition.log)
            min_insync = int(configs.get("min.insync.replicas", "1"))
            partition.update(partition.local, min_insync_replicas=min_insync, now_ms=now_ms)

    def _topic_configs(self, image: MetadataImage, topic: str) -> dict[str, str]:
        configs = dict(self._config.topic_defaults)
        broker_wide = image.configs.get(ConfigResourceType.BROKER, CLUSTER_DEFAULT_BROKER)
        for broker_name, value in broker_wide.items():
            if broker_name in BROKER_SYNONYMS:
                configs[BROKER_SYNONYMS[broker_name]] = value
        configs.update(image.configs.get(ConfigResourceType.TOPIC, topic))
        return configs

    def _delete(self, key: tuple[str, int]) -> None:
        self._offline.pop(key, None)
        partition = self._partitions.pop(key, None)
        if partition is None:
            return
        self.maintenance.untrack(partition.log)
        partition.detach()
        partition.log.close()
        shutil.rmtree(partition.log.directory, ignore_errors=True)
        self._log_dirs.removed(partition.log.directory.parent)
        checkpoints = self._checkpoints.get(partition.log.directory.parent)
        if checkpoints is not None:
            checkpoints.forget(partition.log.topic_partition)
        log.debug("%s-%d: deleted", *key)

    def notify(self, key: tuple[str, int] | None = None, change: Change = Change.ALL) -> None:
        """Wakes every waiter on `changed`, and the watches of partition `key` that care for
        `change` (None: anything may have changed, every watch)."""
        with self.changed:
            self._version += 1
            self.changed.notify_all()
        self.watches.changed(key, change)

    @property
    def version(self) -> int:
        """Counts the changes `notify` signalled (of any partition)."""
        return self._version

    def stop_acknowledging(self) -> None:
        """The broker is about to close its listener: every acks=all wait (and coordinator
        write) on any partition ends now as LOST, answered NOT_LEADER_OR_FOLLOWER while the
        answer can still reach the client, and none starts to wait from here on."""
        with self._lock:
            for partition in self._partitions.values():
                partition.detach()  # which wakes the partition's waiters

    def checkpoint(self) -> None:
        """Writes each online log directory's offset checkpoint files with every log's current
        recovery point and high watermark (Kafka's periodic checkpoints; also at `close`). A
        directory whose files cannot be written goes offline."""
        for partition in self.partitions():
            partition.log.stage_checkpoints()
        self._write_checkpoints()

    @staticmethod
    def write_deferred(deferred: DeferredWrites) -> list[tuple[Path, OSError]]:
        """Writes the checkpoint files a batch of truncations owes (see DeferredWrites),
        without this manager's lock: the caller holds partitions' role locks, which the
        metadata listener takes under it. Returns the directories whose files could not be
        written, for `fail_log_dirs` once the caller released those locks."""
        failures = []
        for checkpoints in deferred.take():
            try:
                checkpoints.write_all()
            except OSError as error:
                failures.append((checkpoints.log_dir, error))
        return failures

    def fail_log_dirs(self, failures: Collection[tuple[Path, OSError]]) -> None:
        """Takes each directory offline with its error (see `write_deferred`)."""
        with self._lock:
            for log_dir, error in failures:
                self._log_dirs.fail(log_dir, error)

    def _write_checkpoints(
        self, *, sync_first: bool = False, clean_shutdown_of: Collection[Path] = ()
    ) -> None:
        """Writes the checkpoint files of the online directories, each after its filesystem
        was synced if `sync_first` (its logs were closed without fsync), and the
        clean-shutdown marker of those in `clean_shutdown_of`."""
        with self._lock:
            directories = [
                checkpoints
                for log_dir, checkpoints in self._checkpoints.items()
                if self._log_dirs.offline_reason(log_dir) is None
            ]
        for checkpoints in directories:
            try:
                if sync_first:
                    sync_filesystem(checkpoints.log_dir)
                checkpoints.write_all()
                if checkpoints.log_dir in clean_shutdown_of:
                    checkpoints.mark_clean_shutdown()
            except OSError as error:
                with self._lock:
                    self._log_dirs.fail(checkpoints.log_dir, error)

    def close(self) -> None:
        """Closes every log without an fsync, then makes each log directory's filesystem
        durable at once and writes its checkpoint files and the clean-shutdown marker of each
        directory none of whose logs went offline (Kafka's LogManager, with one syncfs instead
        of five fsyncs per log: 100,000 at 20,000 replicas); requests still waiting (acks=all,
        long polls) are woken and see that their partitions are gone."""
        self.stop_acknowledging()
        self.maintenance.stop()
        with self._lock:
            partitions = list(self._partitions.values())
            self._partitions.clear()
        try:
            self._recovery_threads.run(lambda p: p.log.close(fsync=False), partitions)
        finally:  # a log that failed to close went offline: its directory gets no marker
            failed = {p.log.directory.parent for p in partitions if p.log.failure is not None}
            self._write_checkpoints(
                sync_first=True, clean_shutdown_of=set(self._checkpoints) - failed
            )
            self.notify()
