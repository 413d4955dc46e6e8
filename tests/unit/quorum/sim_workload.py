"""Random controller requests for the simulation, made by the real gRPC services.

`RequestMaker` stands where `QuorumController` stands for `AdminService` and
`ControllerService`: each service call is turned into the request event the controller thread
would queue, with the decide (or read) function the service really builds.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, TypeVar, cast

from google.protobuf.message import Message

from pykraft.metadata_log.image import MetadataImage
from pykraft.proto import admin_pb2, controller_pb2
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.events import Decide, FetchRequest, Read, ReadRequest, Request, WriteRequest
from pykraft.quorum.quorum_controller import QuorumController
from pykraft.quorum.service import AdminService, ControllerService

M = TypeVar("M", bound=Message)

BROKER_IDS = (1, 2, 3, 4)
TOPIC_NAMES = ("orders", "payments", "clicks")


class RequestMaker:
    """What the services see of the controller: `write`, `read`, `fetch`, `raft_status` and
    `config`."""

    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self.request_id = 0
        self.now_ms = 0
        self.made: Request | None = None

    def write(self, decide: Decide, response_cls: type[M], timeout_ms: int) -> M:
        self.made = WriteRequest(self.request_id, response_cls, self.now_ms + timeout_ms, decide)
        return response_cls()

    def raft_status(self) -> None:
        """No Raft status: answers name the configured controllers."""
        return None

    def read(self, read: Read, response_cls: type[M], timeout_ms: int) -> M:
        self.made = ReadRequest(self.request_id, response_cls, self.now_ms + timeout_ms, read)
        return response_cls()

    def fetch(
        self, after_offset: int, wait_ms: int, timeout_ms: int, *, allow_standby: bool = False
    ) -> controller_pb2.MetadataFetchResponse:
        self.made = FetchRequest(
            self.request_id,
            controller_pb2.MetadataFetchResponse,
            self.now_ms + wait_ms,
            after_offset,
            allow_standby,
        )
        return controller_pb2.MetadataFetchResponse()


class Workload:
    """Draws requests from `rng`: brokers registering and heartbeating (so sessions expire and
    brokers get fenced when they stop), topics created, grown, configured and deleted, producer
    ids, reads and metadata fetches, partitions reassigned (and cancelled), leaders bringing
    every replica into the ISR (which completes a reassignment) and brokers unregistered."""

    def __init__(self, rng: random.Random, config: ControllerConfig) -> None:
        self._rng = rng
        self._maker = RequestMaker(config)
        controller = cast(QuorumController, self._maker)
        self._admin = AdminService(controller)
        self._controller = ControllerService(controller)
        self._incarnations = {broker_id: self._uuid() for broker_id in BROKER_IDS}

    def next_request(self, request_id: int, now_ms: int, image: MetadataImage) -> Request:
        """A request as a client would send it knowing `image` (the furthest committed one)."""
        self._maker.request_id = request_id
        self._maker.now_ms = now_ms
        self._maker.made = None
        kinds = (
            self._register, self._heartbeat, self._heartbeat, self._heartbeat, self._create,
            self._delete, self._grow, self._alter_configs, self._producer_ids, self._describe,
            self._fetch, self._elect, self._reassign, self._expand_isr, self._unregister,
        )  # fmt: skip
        self._rng.choice(kinds)(image)
        assert self._maker.made is not None
        return self._maker.made

    def _register(self, image: MetadataImage) -> None:
        broker_id = self._rng.choice(BROKER_IDS)
        if self._rng.random() < 0.1:
            self._incarnations[broker_id] = self._uuid()  # the broker restarted
        request = controller_pb2.BrokerRegistrationRequest(
            broker_id=broker_id,
            cluster_id=self._maker.config.cluster_id,
            incarnation_id=str(self._incarnations[broker_id]),
            listeners=[controller_pb2.Listener(name="PLAINTEXT", host="b", port=9000 + broker_id)],
            rack=f"rack-{broker_id % 2}",
        )
        self._controller.RegisterBroker(request, _NO_CONTEXT)

    def _some_broker(self, image: MetadataImage) -> tuple[int, int]:
        """A broker id drawn from BROKER_IDS (one draw of the random stream) and its epoch in
        `image` (-1 while it is not registered), as a broker's own request names them."""
        broker_id = self._rng.choice(BROKER_IDS)
        registration = image.cluster.brokers.get(broker_id)
        return broker_id, registration.broker_epoch if registration is not None else -1

    def _heartbeat(self, image: MetadataImage) -> None:
        broker_id, broker_epoch = self._some_broker(image)
        request = controller_pb2.BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=broker_epoch,
            current_metadata_offset=image.offset,
            want_fence=self._rng.random() < 0.02,
            want_shut_down=self._rng.random() < 0.03,
        )
        self._controller.BrokerHeartbeat(request, _NO_CONTEXT)

    def _create(self, image: MetadataImage) -> None:
        topic = admin_pb2.CreatableTopic(
            name=self._rng.choice(TOPIC_NAMES),
            num_partitions=self._rng.randint(1, 3),
            replication_factor=self._rng.randint(1, 3),
        )
        self._admin.CreateTopics(admin_pb2.CreateTopicsRequest(topics=[topic]), _NO_CONTEXT)

    def _delete(self, image: MetadataImage) -> None:
        request = admin_pb2.DeleteTopicsRequest(names=[self._rng.choice(TOPIC_NAMES)])
        self._admin.DeleteTopics(request, _NO_CONTEXT)

    def _grow(self, image: MetadataImage) -> None:
        count = admin_pb2.PartitionCount(name=self._rng.choice(TOPIC_NAMES), count=4)
        request = admin_pb2.CreatePartitionsRequest(topics=[count])
        self._admin.CreatePartitions(request, _NO_CONTEXT)

    def _alter_configs(self, image: MetadataImage) -> None:
        config = admin_pb2.AlterableConfig(
            name="retention.ms", op=admin_pb2.ALTER_CONFIG_SET, value=str(self._rng.randint(1, 9))
        )
        resource = admin_pb2.AlterConfigsResource(
            type=admin_pb2.CONFIG_RESOURCE_TOPIC,
            name=self._rng.choice(TOPIC_NAMES),
            configs=[config],
        )
        request = admin_pb2.AlterConfigsRequest(resources=[resource])
        self._admin.IncrementalAlterConfigs(request, _NO_CONTEXT)

    def _producer_ids(self, image: MetadataImage) -> None:
        broker_id, broker_epoch = self._some_broker(image)
        request = controller_pb2.AllocateProducerIdsRequest(
            broker_id=broker_id, broker_epoch=broker_epoch
        )
        self._controller.AllocateProducerIds(request, _NO_CONTEXT)

    def _describe(self, image: MetadataImage) -> None:
        if self._rng.random() < 0.5:
            self._admin.DescribeTopics(admin_pb2.DescribeTopicsRequest(), _NO_CONTEXT)
        else:
            self._admin.DescribeQuorum(admin_pb2.DescribeQuorumRequest(), _NO_CONTEXT)

    def _fetch(self, image: MetadataImage) -> None:
        request = controller_pb2.MetadataFetchRequest(
            broker_id=self._rng.choice(BROKER_IDS),
            after_offset=max(-1, image.offset - self._rng.randint(0, 3)),
            max_wait_ms=self._rng.choice((0, 500)),
            allow_standby=self._rng.random() < 0.5,
        )
        list(self._controller.MetadataFetch(request, _NO_CONTEXT))

    def _elect(self, image: MetadataImage) -> None:
        request = admin_pb2.ElectLeadersRequest(election_type=admin_pb2.ELECTION_TYPE_PREFERRED)
        self._admin.ElectLeaders(request, _NO_CONTEXT)

    def _some_partition(self, image: MetadataImage) -> tuple[str, int]:
        topic = self._rng.choice(TOPIC_NAMES)
        found = image.topics.get_by_name(topic)
        return topic, self._rng.choice(sorted(found.partitions)) if found is not None else 0

    def _reassign(self, image: MetadataImage) -> None:
        topic, partition = self._some_partition(image)
        cancel = self._rng.random() < 0.2
        replicas = [] if cancel else self._rng.sample(BROKER_IDS, self._rng.randint(1, 3))
        item = admin_pb2.ReassignablePartition(topic=topic, partition=partition, replicas=replicas)
        request = admin_pb2.AlterPartitionReassignmentsRequest(partitions=[item])
        self._admin.AlterPartitionReassignments(request, _NO_CONTEXT)

    def _expand_isr(self, image: MetadataImage) -> None:
        """The leader of some partition asks for every replica in its ISR, as it would once
        they all caught up."""
        topic, partition_id = self._some_partition(image)
        found = image.topics.get_by_name(topic)
        partition = found.partitions.get(partition_id) if found is not None else None
        if found is None or partition is None or partition.leader < 0:
            self._describe(image)
            return
        leader = image.cluster.brokers.get(partition.leader)
        epoch_of = {b: r.broker_epoch for b, r in image.cluster.brokers.items()}
        item = controller_pb2.AlterPartitionItem(
            partition=partition_id,
            leader_epoch=partition.leader_epoch,
            partition_epoch=partition.partition_epoch,
            new_isr_with_epochs=[
                controller_pb2.BrokerState(broker_id=b, broker_epoch=epoch_of.get(b, -1))
                for b in partition.replicas
            ],
        )
        request = controller_pb2.AlterPartitionRequest(
            broker_id=partition.leader,
            broker_epoch=leader.broker_epoch if leader is not None else -1,
            topics=[
                controller_pb2.AlterPartitionTopic(topic_id=str(found.topic_id), partitions=[item])
            ],
        )
        self._controller.AlterPartition(request, _NO_CONTEXT)

    def _unregister(self, image: MetadataImage) -> None:
        request = admin_pb2.UnregisterBrokerRequest(broker_id=self._rng.choice(BROKER_IDS))
        self._admin.UnregisterBroker(request, _NO_CONTEXT)

    def _uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self._rng.getrandbits(128))


_NO_CONTEXT: Any = None  # the services never read their gRPC context
