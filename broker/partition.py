"""One partition replica on this broker: its log, its registration from the metadata, and the
leader's high-water mark.

The high-water mark is the smallest log end offset over the ISR (this broker's own log end for
itself), never moves back, and does not advance while the ISR is smaller than
`min.insync.replicas`. With the ISR only this broker, it follows the log end at once.

Replication seam: follower replicas are not fetched yet (a later part of issue 4). The leader side
is `on_follower_fetch(replica_id, fetch_offset)`, which records a follower's log end offset (what
it asks for next) and advances the high-water mark; the fetcher on the follower side, ISR changes
through AlterPartition and truncation by leader epoch are still to come.
"""

from __future__ import annotations

import threading

from pykraft.broker.local_changes import LocalPartition
from pykraft.broker.log import AppendInfo, LogError, PartitionLog
from pykraft.proto import common_pb2


class Partition:
    """A partition this broker hosts; thread-safe."""

    def __init__(
        self, local: LocalPartition, log: PartitionLog, *, broker_id: int, min_insync_replicas: int
    ) -> None:
        self.log = log
        self._broker_id = broker_id
        self._lock = threading.Lock()
        self._local = local
        self._min_insync_replicas = min_insync_replicas
        self._follower_end_offsets: dict[int, int] = {}

    @property
    def local(self) -> LocalPartition:
        return self._local

    @property
    def topic(self) -> str:
        return self._local.topic

    @property
    def partition(self) -> int:
        return self._local.partition

    @property
    def leader_id(self) -> int:
        return self._local.registration.leader

    @property
    def leader_epoch(self) -> int:
        return self._local.registration.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        return self._local.registration.isr

    @property
    def min_insync_replicas(self) -> int:
        return self._min_insync_replicas

    @property
    def is_leader(self) -> bool:
        return self._local.registration.leader == self._broker_id

    def update(self, local: LocalPartition, *, min_insync_replicas: int) -> None:
        """Takes a newer registration (or new configs); a new leader epoch forgets what the
        previous epoch knew of the followers."""
        with self._lock:
            old = self._local.registration
            new = local.registration
            assert new.leader_epoch >= old.leader_epoch, (old, new)
            assert new.partition_epoch >= old.partition_epoch, (old, new)
            if new.leader_epoch != old.leader_epoch:
                self._follower_end_offsets.clear()
            self._local = local
            self._min_insync_replicas = min_insync_replicas
        self.maybe_advance_high_watermark()

    def epoch_error(self, current_leader_epoch: int) -> LogError | None:
        """Kafka's check of the epoch a client believes in (-1: no check)."""
        epoch = self.leader_epoch
        if current_leader_epoch < 0 or current_leader_epoch == epoch:
            return None
        if current_leader_epoch < epoch:
            return LogError(
                common_pb2.FENCED_LEADER_EPOCH,
                f"leader epoch {current_leader_epoch} is older than the current {epoch}",
            )
        return LogError(
            common_pb2.UNKNOWN_LEADER_EPOCH,
            f"leader epoch {current_leader_epoch} is newer than this broker's {epoch}",
        )

    def append_as_leader(self, batches: bytes, *, acks: int, now_ms: int) -> AppendInfo:
        """Appends with the current leader epoch. With acks=-1 and an ISR smaller than
        min.insync.replicas, LogError(NOT_ENOUGH_REPLICAS) before anything is written."""
        isr, needed = self.isr, self._min_insync_replicas
        if acks == -1 and len(isr) < needed:
            raise LogError(
                common_pb2.NOT_ENOUGH_REPLICAS,
                f"the ISR {list(isr)} is smaller than min.insync.replicas={needed}",
            )
        info = self.log.append_as_leader(batches, leader_epoch=self.leader_epoch, now_ms=now_ms)
        self.maybe_advance_high_watermark()
        return info

    def on_follower_fetch(self, replica_id: int, fetch_offset: int) -> bool:
        """The replication seam: follower `replica_id` asked for `fetch_offset`, so it holds
        everything below it; says whether the high-water mark advanced."""
        with self._lock:
            known = self._follower_end_offsets.get(replica_id, -1)
            self._follower_end_offsets[replica_id] = max(known, fetch_offset)
        return self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self) -> bool:
        """Raises the high-water mark to the smallest log end offset over the ISR (only as
        leader, and only with at least min.insync.replicas in it); says whether it moved."""
        with self._lock:
            if not self.is_leader or len(self.isr) < self._min_insync_replicas:
                return False
            candidate = self.log.log_end_offset
            for replica in self.isr:
                if replica != self._broker_id:
                    candidate = min(candidate, self._follower_end_offsets.get(replica, -1))
            if candidate <= self.log.high_watermark:
                return False
            self.log.update_high_watermark(candidate)
            return True
