"""Which hosted partition serves a request, or why none may (Kafka's ReplicaManager's
getPartitionOrError), and where a consumer should read instead (KIP-392).

`leader` (or `replica`, for the consumer reads any replica may serve): unknown topic or
partition -> UNKNOWN_TOPIC_OR_PARTITION; a broker that may not serve (fenced, or no heartbeat
within the session timeout) or a partition it does not lead (or host) -> NOT_LEADER_OR_FOLLOWER
with the leader it knows, so clients refresh and retry; an offline replica ->
KAFKA_STORAGE_ERROR. Each is a `LeaderError`. `preferred_read_replica` is the leader's choice of
where a consumer should read instead (`replica_selector`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

from pykraft.broker import replica_selector
from pykraft.broker.config import BrokerConfig
from pykraft.broker.local_changes import LocalPartition
from pykraft.broker.log import LogError
from pykraft.broker.partition import Partition
from pykraft.metadata_log import MetadataImage
from pykraft.proto import broker_pb2, common_pb2

_NO_LEADER: Final = -1


class ReplicaLookup:
    """Mixed into `replica_manager.ReplicaManager`, whose fields below it reads: the image, the
    hosted and offline partitions (under `_lock`) and whether this broker may serve now."""

    _config: BrokerConfig
    _broker_id: int
    _may_serve: Callable[[int], bool]
    _image: MetadataImage
    _racks: tuple[object, dict[int, str]]
    _partitions: dict[tuple[str, int], Partition]
    _offline: dict[tuple[str, int], tuple[LocalPartition, str]]
    _lock: threading.Lock

    def leader(self, topic: str, partition_id: int, now_ms: int) -> Partition:
        """The partition if this broker may serve it as leader now; LeaderError otherwise."""
        partition = self.replica(topic, partition_id, now_ms)
        if not partition.is_leader:
            raise LeaderError(
                common_pb2.NOT_LEADER_OR_FOLLOWER,
                f"broker {self._broker_id} is not the leader of {topic}-{partition_id}",
                partition.leader_id,
                partition.leader_epoch,
            )
        return partition

    def replica(self, topic: str, partition_id: int, now_ms: int) -> Partition:
        """The partition if this broker hosts it and may serve it now, as leader or follower;
        LeaderError otherwise."""
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
        with self._lock:
            partition = self._partitions.get((topic, partition_id))
            offline = self._offline.get((topic, partition_id))
        if offline is not None:
            raise LeaderError(
                common_pb2.KAFKA_STORAGE_ERROR,
                f"{topic}-{partition_id} is offline on broker {self._broker_id}: {offline[1]}",
                leader if leader != self._broker_id else _NO_LEADER,
                epoch,
            )
        if partition is None:
            raise LeaderError(
                common_pb2.NOT_LEADER_OR_FOLLOWER,
                f"broker {self._broker_id} is not a replica of {topic}-{partition_id}",
                leader,
                epoch,
            )
        return partition

    def _unfenced_racks(self) -> dict[int, str]:
        cluster = self._image.cluster
        built_for, racks = self._racks
        if built_for is not cluster:
            racks = {
                broker_id: cluster.brokers[broker_id].rack or ""
                for broker_id in cluster.unfenced_broker_ids()
            }
            self._racks = (cluster, racks)
        return racks

    def preferred_read_replica(
        self, partition: Partition, client_rack: str, fetch_offset: int, now_ms: int
    ) -> int | None:
        """As `partition`'s leader: the broker a consumer in `client_rack` fetching at
        `fetch_offset` should read from instead of this one, by replica.selector.class; None
        for this one (see `replica_selector`)."""
        selector = self._config.replica_selector_class
        if selector != replica_selector.RACK_AWARE_SELECTOR or not client_rack:
            return None
        racks = self._unfenced_racks()
        leader = replica_selector.ReplicaView(
            self._broker_id, self._config.rack, partition.log_end_offset, 0
        )
        candidates = replica_selector.read_candidates(
            isr=partition.isr,
            followers=partition.follower_states(),
            racks=racks,
            fetch_offset=fetch_offset,
            now_ms=now_ms,
        )
        return replica_selector.preferred_read_replica(selector, client_rack, leader, candidates)


class LeaderError(LogError):
    """A partition this broker cannot serve as leader, with the leader it knows of."""

    def __init__(
        self,
        error_code: int,
        message: str,
        leader_id: int = _NO_LEADER,
        leader_epoch: int = -1,
    ) -> None:
        super().__init__(error_code, message)
        self.current_leader = broker_pb2.LeaderIdAndEpoch(
            leader_id=leader_id, leader_epoch=leader_epoch
        )
