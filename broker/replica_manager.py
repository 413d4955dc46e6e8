"""The partitions this broker hosts, kept in step with the metadata, and the leader's side of
Produce, Fetch and ListOffsets (Kafka's ReplicaManager).

`on_metadata(delta, image)` is the metadata follower's listener: it deletes, creates and updates
exactly the partitions `local_changes` names, under `<log dir>/<topic>-<partition>`, with the
topic's LogConfig (broker defaults, then cluster-wide broker overrides, then topic overrides).

Every request goes through `leader`: unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION;
a broker that may not serve (fenced, or no heartbeat within the session timeout) or a partition it
does not lead -> NOT_LEADER_OR_FOLLOWER with the leader it knows, so clients refresh and retry.
Fetch long polls wait on one condition variable, signalled on every append, high-water mark move
and metadata change.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

from pykraft.broker.config import BrokerConfig
from pykraft.broker.local_changes import LocalChanges, local_changes
from pykraft.broker.log import LogConfig, LogError, PartitionLog
from pykraft.broker.log_maintenance import LogMaintenance
from pykraft.broker.partition import Partition
from pykraft.metadata_log import BROKER_SYNONYMS, MetadataDelta, MetadataImage
from pykraft.metadata_log.records import ConfigResourceType
from pykraft.proto import broker_pb2, common_pb2

log = logging.getLogger(__name__)

VALID_ACKS: Final = frozenset({0, 1, -1})
# The cluster-wide default entity of broker configs, as Kafka names it.
CLUSTER_DEFAULT_BROKER: Final = ""
_NO_LEADER: Final = -1


class ReplicaManager:
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
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._lock = threading.Lock()
        # Signalled on appends, high-water mark moves and metadata changes (fetch long polls).
        self.changed = threading.Condition()
        self._version = 0
        self.maintenance = LogMaintenance(
            lambda: [p.log for p in self.partitions()],
            wall_clock_ms=wall_clock_ms,
            retention_check_interval_ms=config.log_retention_check_interval_ms,
            cleaner_backoff_ms=config.log_cleaner_backoff_ms,
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
        """Acts on the change from the current image to `image` (see module doc)."""
        previous = self._image
        changes = local_changes(previous, image, self._broker_id, delta)
        with self._lock:
            self._apply(changes, image, now_ms)
            if image.configs is not previous.configs:
                self._reconfigure(image, changes, now_ms)
            self._image = image
        self.notify()

    def _apply(self, changes: LocalChanges, image: MetadataImage, now_ms: int) -> None:
        for key in changes.deletes:
            self._delete(key)
        for local in (*changes.leaders, *changes.followers):
            configs = self._topic_configs(image, local.topic)
            min_insync = int(configs.get("min.insync.replicas", "1"))
            existing = self._partitions.get((local.topic, local.partition))
            if existing is None:
                path = self._log_dir_for(local.directory_name) / local.directory_name
                log_ = PartitionLog.open(path, LogConfig.from_topic_configs(configs), now_ms=now_ms)
                self.maintenance.track(log_)
                existing = Partition(
                    local,
                    log_,
                    broker_id=self._broker_id,
                    min_insync_replicas=min_insync,
                    now_ms=now_ms,
                )
                self._partitions[(local.topic, local.partition)] = existing
            existing.update(local, min_insync_replicas=min_insync, now_ms=now_ms)
            leader = "this broker" if existing.is_leader else f"broker {existing.leader_id}"
            log.info(
                "%s: led by %s in epoch %d", local.directory_name, leader, existing.leader_epoch
            )

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

    def _log_dir_for(self, directory_name: str) -> Path:
        """The log dir already holding the partition, else the one holding the fewest."""
        for log_dir in self._config.log_dirs:
            if (log_dir / directory_name).exists():
                return log_dir
        counts = {d: sum(1 for _ in _children(d)) for d in self._config.log_dirs}
        return min(self._config.log_dirs, key=lambda d: counts[d])

    def _delete(self, key: tuple[str, int]) -> None:
        partition = self._partitions.pop(key, None)
        if partition is None:
            return
        self.maintenance.untrack(partition.log)
        partition.detach()
        partition.log.close()
        shutil.rmtree(partition.log.directory, ignore_errors=True)
        log.info("%s-%d: deleted", *key)

    def notify(self) -> None:
        with self.changed:
            self._version += 1
            self.changed.notify_all()

    @property
    def version(self) -> int:
        return self._version

    # --- finding the leader ---

    def leader(self, topic: str, partition_id: int, now_ms: int) -> Partition:
        """The partition if this broker may serve it as leader now; LeaderError otherwise."""
        image = self._image
        topic_image = image.topics.get_by_name(topic)
        registration = None if topic_image is None else topic_image.partitions.get(partition_id)
        if registration is None:
            raise LeaderError(
                common_pb2.UNKNOWN_TOPIC_OR_PARTITION,
                f"This server does not host {topic}-{partition_id}.",
            )
        leader, epoch = registration.leader, registration.leader_epoch
        if not self._may_serve(now_ms):
            raise LeaderError(
                common_pb2.NOT_LEADER_OR_FOLLOWER,
                f"broker {self._broker_id} is fenced or out of touch with the controller quorum",
                leader if leader != self._broker_id else _NO_LEADER,
                epoch,
            )
        partition = self.partition(topic, partition_id)
        if partition is None or not partition.is_leader:
            raise LeaderError(
                common_pb2.NOT_LEADER_OR_FOLLOWER,
                f"broker {self._broker_id} is not the leader of {topic}-{partition_id}",
                leader,
                epoch,
            )
        return partition

    def stop_acknowledging(self) -> None:
        """The broker is about to close its listener: every acks=all wait (and coordinator
        write) on any partition ends now as LOST, answered NOT_LEADER_OR_FOLLOWER while the
        answer can still reach the client, and none starts to wait from here on."""
        with self._lock:
            for partition in self._partitions.values():
                partition.detach()
        self.notify()

    def close(self) -> None:
        """Closes every log; requests still waiting (acks=all, long polls) are woken and see
        that their partitions are gone."""
        self.stop_acknowledging()
        self.maintenance.stop()
        with self._lock:
            for partition in self._partitions.values():
                partition.log.close()
            self._partitions.clear()
        self.notify()


class LeaderError(LogError):
    """A partition this broker cannot serve as leader, with the leader it knows of."""

    def __init__(
        self, error_code: int, message: str, leader_id: int = _NO_LEADER, leader_epoch: int = -1
    ) -> None:
        super().__init__(error_code, message)
        self.current_leader = broker_pb2.LeaderIdAndEpoch(
            leader_id=leader_id, leader_epoch=leader_epoch
        )


def _children(directory: Path) -> Iterator[Path]:
    return directory.iterdir() if directory.exists() else iter(())
