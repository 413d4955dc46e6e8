"""The fuzzed cluster: three controllers and three brokers with a topic, a group that has
committed offsets, routes to the node a request is meant for, a health check, and the state
that no refused request may change."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import Message

from pykraft.broker.group.coordinator import partition_for
from pykraft.metadata_log.image import MetadataImage
from pykraft.proto import admin_pb2, broker_pb2, common_pb2, group_pb2

from ..integration.cluster import full_isr, running_cluster
from ..integration.controllers import Quorum
from ..integration.processes import BrokerProcess, wait_for
from .harness import Rpc
from .messages import field_of
from .requests import Facts

TOPIC = "fuzz"
PARTITIONS = 3
GROUP = "fuzz-group"
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 3


@dataclass
class State:
    image: tuple[Any, ...]
    offsets: dict[tuple[str, int], tuple[int, int]]
    groups: dict[int, list[tuple[str, str]]]
    committed: list[tuple[str, int, int, str]]


@dataclass
class FuzzCluster:
    quorum: Quorum
    brokers: dict[int, BrokerProcess]
    facts: Facts
    baseline: State | None = None

    def image(self) -> MetadataImage:
        return self.quorum.image()

    def coordinator(self, group_id: str) -> int:
        offsets = self.image().topics.get_by_name(OFFSETS_TOPIC)
        assert offsets is not None
        return offsets.partitions[partition_for(group_id, len(offsets.partitions))].leader

    def channel(self, node: str, rpc: Rpc, request: Message | None, broker_id: int) -> grpc.Channel:
        """The active controller, or for a broker: the group's coordinator for a group RPC
        (so the coordinator's own checks are reached), else broker `broker_id`."""
        if node == "controller":
            return self.quorum.channel(self.quorum.wait_active().address)
        group_id = _group_of(request) if request is not None else None
        if group_id:
            broker_id = self.coordinator(group_id)
        broker = self.brokers[broker_id]
        broker.stub()
        assert broker.channel is not None
        return broker.channel

    def assert_healthy(self) -> None:
        """Every node alive and answering, every broker unfenced and seeing all three."""
        for controller in self.quorum.controllers:
            assert controller.alive, f"controller {controller.node_id} died"
            answer = self.quorum.admin(controller.address).DescribeQuorum(
                admin_pb2.DescribeQuorumRequest(), timeout=5
            )
            assert answer.header.error_code in (common_pb2.NONE, common_pb2.NOT_CONTROLLER)
        for broker_id, broker in self.brokers.items():
            assert broker.alive, f"broker {broker_id} died"
            metadata = broker.stub().Metadata(broker_pb2.MetadataRequest(), timeout=5)
            assert sorted(b.id for b in metadata.brokers) == sorted(self.brokers), metadata

    def state(self) -> State:
        image = self.image()
        state = State(
            image=(image.features, image.cluster, image.topics, image.configs, image.producer_ids),
            offsets={},
            groups={},
            committed=[],
        )
        for topic in (TOPIC, OFFSETS_TOPIC):
            found = image.topics.get_by_name(topic)
            assert found is not None
            for partition, registration in found.partitions.items():
                state.offsets[topic, partition] = self._offsets(
                    self.brokers[registration.leader], topic, partition
                )
        for broker_id, broker in self.brokers.items():
            listed = broker.stub().ListGroups(group_pb2.ListGroupsRequest(), timeout=5)
            state.groups[broker_id] = sorted((g.group_id, g.group_state) for g in listed.groups)
        fetched = (
            self.brokers[self.coordinator(GROUP)]
            .stub()
            .OffsetFetch(group_pb2.OffsetFetchRequest(group_id=GROUP), timeout=5)
        )
        assert fetched.header.error_code == common_pb2.NONE, fetched.header
        state.committed = sorted(
            (t.topic, p.partition, p.committed_offset, p.metadata)
            for t in fetched.topics
            for p in t.partitions
        )
        return state

    @staticmethod
    def _offsets(broker: BrokerProcess, topic: str, partition: int) -> tuple[int, int]:
        found = []
        for timestamp in (-2, -1):
            request = broker_pb2.ListOffsetsRequest(
                replica_id=-1,
                topics=[
                    broker_pb2.ListOffsetsTopic(
                        topic=topic,
                        partitions=[
                            broker_pb2.ListOffsetsPartition(
                                partition=partition, current_leader_epoch=-1, timestamp=timestamp
                            )
                        ],
                    )
                ],
            )
            answer = broker.stub().ListOffsets(request, timeout=5).topics[0].partitions[0]
            assert answer.error_code == common_pb2.NONE, answer
            found.append(answer.offset)
        return found[0], found[1]

    def assert_unchanged(self) -> None:
        """The state is the baseline's: no refused request changed anything."""
        assert self.baseline is not None
        now = self.state()
        for field in ("image", "offsets", "groups", "committed"):
            assert getattr(now, field) == getattr(self.baseline, field), (
                f"{field} changed:\nbefore {getattr(self.baseline, field)}\n"
                f"after  {getattr(now, field)}"
            )


def _group_of(request: Message) -> str | None:
    fields = request.DESCRIPTOR.fields_by_name
    if "group_id" in fields:
        return str(field_of(request, "group_id"))
    if "group_ids" in fields:
        ids = list(field_of(request, "group_ids"))
        return str(ids[0]) if ids else None
    if "key" in fields:
        return str(field_of(request, "key"))
    return None


@contextmanager
def fuzz_cluster(tmp_path: Path) -> Iterator[FuzzCluster]:
    overrides = ("--override", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}")
    with running_cluster(tmp_path, topic=TOPIC, partitions=PARTITIONS, broker_args=overrides) as (
        quorum,
        brokers,
    ):
        cluster = FuzzCluster(quorum, brokers, _facts(quorum.image()))
        _prepare(cluster)
        wait_for(
            lambda: full_isr(quorum, OFFSETS_TOPIC, OFFSETS_PARTITIONS),
            timeout_s=30,
            what=f"every replica of {OFFSETS_TOPIC} in its ISR",
        )
        cluster.facts = _facts(quorum.image())
        cluster.baseline = cluster.state()
        yield cluster


def _prepare(cluster: FuzzCluster) -> None:
    """Does once what some valid requests do once: creates the offsets topic, commits the
    group's offsets and has every broker take a block of producer ids."""
    first = cluster.brokers[1].stub()
    found = wait_for(
        lambda: _found(
            first.FindCoordinator(group_pb2.FindCoordinatorRequest(key=GROUP), timeout=10)
        ),
        timeout_s=30,
        what="the group's coordinator",
    )
    commit = group_pb2.OffsetCommitRequest(
        group_id=GROUP,
        member_id="",
        member_epoch=-1,
        topics=[
            group_pb2.OffsetCommitTopic(
                topic=TOPIC,
                partitions=[
                    group_pb2.OffsetCommitPartition(
                        partition=p, committed_offset=p, committed_leader_epoch=-1
                    )
                    for p in range(PARTITIONS)
                ],
            )
        ],
    )
    committed = wait_for(
        lambda: _committed(cluster.brokers[found].stub().OffsetCommit(commit, timeout=10)),
        timeout_s=30,
        what="the group's first commit",
    )
    assert committed
    for broker in cluster.brokers.values():
        produced = wait_for(_producer_id(broker), timeout_s=30, what="a producer id")
        assert produced >= 0


def _found(response: group_pb2.FindCoordinatorResponse) -> int | None:
    return response.node_id if response.header.error_code == common_pb2.NONE else None


def _committed(response: group_pb2.OffsetCommitResponse) -> bool:
    codes = [response.header.error_code] + [
        p.error_code for t in response.topics for p in t.partitions
    ]
    return all(code == common_pb2.NONE for code in codes)


def _producer_id(broker: BrokerProcess) -> Callable[[], int | None]:
    def ask() -> int | None:
        response = broker.stub().InitProducerId(broker_pb2.InitProducerIdRequest(), timeout=10)
        return response.producer_id if response.header.error_code == common_pb2.NONE else None

    return ask


def _facts(image: MetadataImage) -> Facts:
    topics = {name: str(topic_id) for name, topic_id in image.topics.by_name.items()}
    partitions = {}
    leaders = {}
    for topic in image.topics.by_id.values():
        partitions[topic.name] = len(topic.partitions)
        for partition, registration in topic.partitions.items():
            leaders[topic.name, partition] = (
                registration.leader,
                registration.leader_epoch,
                registration.partition_epoch,
            )
    epochs = {b.broker_id: b.broker_epoch for b in image.cluster.brokers.values()}
    return Facts(topics, partitions, epochs, leaders, GROUP)
