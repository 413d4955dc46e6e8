"""ISR changes sent by partition leaders to the active controller (Kafka's AlterPartitionManager
together with the leader's ISR expiration and expansion checks).

A thread looks at every partition this broker leads every `check_interval_ms` (half of
replica.lag.time.max.ms, capped so expansions follow catch-ups quickly) and, for those whose
`Partition.propose_isr` asks for a change (one in flight per partition), sends AlterPartition
requests of at most ALTER_PARTITION_PARTITIONS_MAX partitions (a broker back after a restart
rejoins the ISRs of thousands), logging one summary line each. The answer is not applied here:
the new ISR and partition epoch take effect when the metadata log brings them. A refusal for
staleness (INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH) keeps the
partition waiting for that metadata; any other failure lets a later pass try again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Final
from uuid import UUID

from pykraft.broker.controller_channel import ControllerCaller, ControllerUnavailableError
from pykraft.broker.isr import UNDEFINED_BROKER_EPOCH
from pykraft.broker.local_changes import counted
from pykraft.broker.partition import Partition
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.proto import common_pb2, controller_pb2

log = logging.getLogger(__name__)

ISR_CHECK_INTERVAL_MS_MAX: Final = 250
# Partitions per AlterPartition request: each changed partition is a record, and the controller
# refuses an operation of more than RECORDS_PER_OPERATION_MAX (10,000) records whole.
ALTER_PARTITION_PARTITIONS_MAX: Final = 5_000
# Refusals that mean this broker's metadata is behind: wait for it rather than send again.
_WAIT_FOR_METADATA: Final = frozenset(
    {
        common_pb2.INVALID_UPDATE_VERSION,
        common_pb2.FENCED_LEADER_EPOCH,
        common_pb2.UNKNOWN_LEADER_EPOCH,
    }
)


class IsrUpdater:
    """Shrinks and expands the ISRs of the partitions this broker leads."""

    def __init__(
        self,
        manager: ReplicaManager,
        caller: ControllerCaller,
        *,
        broker_id: int,
        broker_epoch: Callable[[], int],
        may_serve: Callable[[int], bool],
        lag_time_max_ms: int,
        request_timeout_ms: int,
        clock_ms: Callable[[], int],
    ) -> None:
        self._manager = manager
        self._caller = caller
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._may_serve = may_serve
        self._lag_time_max_ms = lag_time_max_ms
        self._request_timeout_ms = request_timeout_ms
        self._clock_ms = clock_ms
        self.check_interval_ms = max(1, min(lag_time_max_ms // 2, ISR_CHECK_INTERVAL_MS_MAX))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="isr-updater", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._request_timeout_ms / 1000 + 1)

    def _run(self) -> None:
        while not self._stop.wait(self.check_interval_ms / 1000):
            try:
                self.check_once()
            except ControllerUnavailableError as error:
                log.warning("AlterPartition not sent: %s", error)

    def check_once(self) -> None:
        """One pass: proposes and sends the ISR changes due now."""
        now_ms = self._clock_ms()
        if not self._may_serve(now_ms):
            return
        cluster = self._manager.image.cluster
        eligible = {b: cluster.brokers[b].broker_epoch for b in cluster.unfenced_broker_ids()}
        proposals: list[tuple[Partition, tuple[int, ...]]] = []
        for partition in self._manager.partitions():
            new_isr = partition.propose_isr(
                now_ms=now_ms, lag_time_max_ms=self._lag_time_max_ms, eligible=eligible
            )
            if new_isr is not None:
                proposals.append((partition, new_isr))
        if proposals:
            self._send(proposals)

    def _send(self, proposals: list[tuple[Partition, tuple[int, ...]]]) -> None:
        for first in range(0, len(proposals), ALTER_PARTITION_PARTITIONS_MAX):
            self._send_one(proposals[first : first + ALTER_PARTITION_PARTITIONS_MAX])

    def _send_one(self, proposals: list[tuple[Partition, tuple[int, ...]]]) -> None:
        request = controller_pb2.AlterPartitionRequest(
            broker_id=self._broker_id, broker_epoch=self._broker_epoch()
        )
        by_topic: dict[UUID, controller_pb2.AlterPartitionTopic] = {}
        sent: dict[tuple[str, int], Partition] = {}
        for partition, new_isr in proposals:
            registration = partition.local.registration
            log.debug(
                "%s-%d: asking to change the ISR %s -> %s",
                partition.topic,
                partition.partition,
                list(registration.isr),
                list(new_isr),
            )
            topic_id = partition.local.topic_id
            topic = by_topic.get(topic_id)
            if topic is None:
                topic = by_topic[topic_id] = request.topics.add(topic_id=str(topic_id))
            topic.partitions.add(
                partition=partition.partition,
                leader_epoch=registration.leader_epoch,
                partition_epoch=registration.partition_epoch,
                new_isr_with_epochs=self._with_epochs(partition, new_isr),
            )
            sent[(str(topic_id), partition.partition)] = partition
        names = [f"{partition.topic}-{partition.partition}" for partition, _ in proposals]
        log.info("asking to change the ISR: %s", counted("partitions", names))
        try:
            response = self._caller.call(
                "AlterPartition",
                request,
                controller_pb2.AlterPartitionResponse,
                self._request_timeout_ms / 1000,
            )
        except ControllerUnavailableError:
            for partition in sent.values():
                partition.alter_failed(self._clock_ms())
            raise
        self._apply(response, sent)

    def _with_epochs(
        self, partition: Partition, new_isr: tuple[int, ...]
    ) -> list[controller_pb2.BrokerState]:
        """Each member with the broker epoch its fetches carried (this broker's own for
        itself), so the controller refuses a member that has restarted since (KIP-903)."""
        epochs = {b: state.broker_epoch for b, state in partition.follower_states().items()}
        epochs[self._broker_id] = self._broker_epoch()
        return [
            controller_pb2.BrokerState(
                broker_id=member, broker_epoch=epochs.get(member, UNDEFINED_BROKER_EPOCH)
            )
            for member in new_isr
        ]

    def _apply(
        self,
        response: controller_pb2.AlterPartitionResponse,
        sent: dict[tuple[str, int], Partition],
    ) -> None:
        if response.header.error_code != common_pb2.NONE:
            log.warning("AlterPartition refused: %s", response.header.error_message)
            for partition in sent.values():
                partition.alter_failed(self._clock_ms())
            return
        for result in response.partitions:
            partition_ = sent.pop((result.topic_id, result.partition), None)
            if partition_ is None:
                continue
            if result.error_code == common_pb2.NONE:
                if result.partition_epoch <= partition_.local.registration.partition_epoch:
                    # Nothing changed: no metadata will come.
                    partition_.alter_failed(self._clock_ms())
                continue
            log.info(
                "%s-%d: ISR change refused: %s",
                partition_.topic,
                partition_.partition,
                result.error_message,
            )
            if result.error_code not in _WAIT_FOR_METADATA:
                partition_.alter_failed(self._clock_ms())
        for partition in sent.values():
            partition.alter_failed(self._clock_ms())  # no answer for it
