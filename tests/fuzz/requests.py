"""One fuzzer per RPC, keyed "Service.Method": the requests it sends and whether each of them
must be refused.

Reads (Describe*, Metadata, Fetch, ...) get any message. Writes get any message with at least
one defect that makes it invalid (a bad name, a stale or future epoch, an unknown member, a
corrupt batch), so that every one of them must be refused and nothing may change; the
defect is drawn, so hypothesis shrinks to the smallest request that is still wrong.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message
from hypothesis import strategies as st

from pykraft.proto import admin_pb2, broker_pb2, controller_pb2, group_pb2

from .messages import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INVALID_TOPIC_NAMES,
    Descriptor,
    any_records,
    corrupt_records,
    field_of,
    int32s,
    int64s,
    message_of,
    names,
    nasty_texts,
)


@dataclass(frozen=True)
class Facts:
    """What the fuzzers know of the running cluster, to aim near the valid requests."""

    topics: dict[str, str]  # name -> topic id
    partitions: dict[str, int]  # name -> partition count
    broker_epochs: dict[int, int]
    # (topic, partition) -> (leader, leader_epoch, partition_epoch)
    leaders: dict[tuple[str, int], tuple[int, int, int]]
    group: str  # a group without members that has committed offsets


EXAMPLE_FACTS = Facts(
    topics={"fuzz": str(uuid.UUID(int=1))},
    partitions={"fuzz": 3},
    broker_epochs={1: 10, 2: 11, 3: 12},
    leaders={("fuzz", p): (p + 1, 0, 0) for p in range(3)},
    group="fuzz-group",
)


@dataclass(frozen=True)
class Fuzz:
    requests: st.SearchStrategy[Message]
    # True when the request is invalid: it must be refused, item by item or as a whole.
    refused: Callable[[Message], bool]


def _always(request: Message) -> bool:
    return True


def _never(request: Message) -> bool:
    return False


def _unless_validate_only(request: Message) -> bool:
    return not field_of(request, "validate_only")


def _read(descriptor: Descriptor, overrides: dict[str, Any]) -> Fuzz:
    return Fuzz(message_of(descriptor, overrides), _never)


def _missing(facts: Facts) -> st.SearchStrategy[str]:
    """Names that are no topic (or group) of the cluster."""
    real = {*facts.topics, facts.group, "__consumer_offsets"}
    return names().filter(lambda name: name not in real)


def _stale_or_future(current: int, bits: int = 32) -> st.SearchStrategy[int]:
    top = 2 ** (bits - 1) - 1
    return st.sampled_from([current - 1, current + 1, current + 1000, -1, top, -top - 1]).filter(
        lambda value: value != current
    )


def _bad_epoch(facts: Facts, broker_id: int) -> st.SearchStrategy[int]:
    return _stale_or_future(facts.broker_epochs.get(broker_id, 0), bits=64)


def _broker_and_bad_epoch(facts: Facts) -> st.SearchStrategy[tuple[int, int]]:
    """A real broker with a stale or future epoch, or a broker id nobody registered."""
    real = st.sampled_from(sorted(facts.broker_epochs)).flatmap(
        lambda broker_id: st.tuples(st.just(broker_id), _bad_epoch(facts, broker_id))
    )
    unknown = st.tuples(
        st.sampled_from([0, -1, 42, INT32_MAX, INT32_MIN]), st.sampled_from([0, 1, INT64_MAX])
    )
    return st.one_of(real, unknown)


# ---- AdminService ----

BAD_VALUES = {
    "retention.ms": ("soon", "-5", "", "9" * 40, "1.5"),
    "min.insync.replicas": ("0", "-1", "x", ""),
    "cleanup.policy": ("soon", "", "deleted"),
}


@st.composite
def _create_topics(draw: st.DrawFn, facts: Facts) -> Message:
    request = draw(message_of(admin_pb2.CreateTopicsRequest.DESCRIPTOR, _ADMIN_NAMES(facts)))
    assert isinstance(request, admin_pb2.CreateTopicsRequest)
    for topic in request.topics:
        defect = draw(st.sampled_from(("name", "exists", "partitions", "rf", "config", "value")))
        if defect == "name":
            topic.name = draw(st.sampled_from(INVALID_TOPIC_NAMES))
        elif defect == "exists":
            topic.name = draw(st.sampled_from(sorted(facts.topics)))
        elif defect == "partitions":  # -1 is the default; 0, other negatives and huge are not
            topic.num_partitions = draw(st.sampled_from((0, -2, INT32_MIN, INT32_MAX, 10**6)))
        elif defect == "rf":
            topic.replication_factor = draw(st.sampled_from((0, -2, 4, 2**15, INT32_MAX)))
        elif defect == "config":
            topic.configs[draw(st.sampled_from(("no.such.key", "", "retention")))] = "1"
        else:
            key, values = draw(st.sampled_from(sorted(BAD_VALUES.items())))
            topic.configs[key] = draw(st.sampled_from(values))
    return request


@st.composite
def _create_partitions(draw: st.DrawFn, facts: Facts) -> Message:
    request = draw(message_of(admin_pb2.CreatePartitionsRequest.DESCRIPTOR, _ADMIN_NAMES(facts)))
    assert isinstance(request, admin_pb2.CreatePartitionsRequest)
    for item in request.topics:
        if item.name in facts.partitions and draw(st.booleans()):
            current = facts.partitions[item.name]
            item.count = draw(st.sampled_from((current, current - 1, 0, -1, INT32_MIN, INT32_MAX)))
        else:
            item.name = draw(_missing(facts))
    return request


@st.composite
def _alter_configs(draw: st.DrawFn, facts: Facts) -> Message:
    request = draw(message_of(admin_pb2.AlterConfigsRequest.DESCRIPTOR, _CONFIG_OVERRIDES(facts)))
    assert isinstance(request, admin_pb2.AlterConfigsRequest)
    for resource in request.resources:
        defect = draw(st.sampled_from(("type", "missing", "broker", "key", "value", "op")))
        if defect == "type":
            resource.type = draw(st.sampled_from((0, 1, 3, 99, -1)))  # type: ignore[assignment]
        elif defect == "missing":
            resource.type = admin_pb2.CONFIG_RESOURCE_TOPIC
            resource.name = draw(_missing(facts))
        elif defect == "broker":
            resource.type = admin_pb2.CONFIG_RESOURCE_BROKER
            resource.name = draw(st.sampled_from(("x", "-1", "1.0", " 1", "é", "٣")))
        else:
            entry = resource.configs.add(name="retention.ms", value="1000")
            if defect == "key":
                entry.name = draw(st.sampled_from(("no.such.key", "", "retention")))
            elif defect == "value":
                entry.name, values = draw(st.sampled_from(sorted(BAD_VALUES.items())))
                entry.value = draw(st.sampled_from(values))
            else:
                entry.op = draw(st.sampled_from((2, 7, -1)))  # type: ignore[assignment]
    return request


@st.composite
def _elect_leaders(draw: st.DrawFn, facts: Facts) -> Message:
    """Any election: the preferred replicas lead already, so each is refused (not needed)."""
    return draw(message_of(admin_pb2.ElectLeadersRequest.DESCRIPTOR, _ADMIN_NAMES(facts)))


def _reassignments(facts: Facts) -> st.SearchStrategy[Message]:
    """Reassignments onto brokers that are not registered (or cancels, with none in
    progress): every partition is refused and nothing moves."""
    overrides = {**_ADMIN_NAMES(facts), "partition": st.integers(-1, 4)}
    overrides["replicas"] = st.integers(1000, 2000)
    return message_of(admin_pb2.AlterPartitionReassignmentsRequest.DESCRIPTOR, overrides)


def _ADMIN_NAMES(facts: Facts) -> dict[str, Any]:
    topic_names = names(*facts.topics, "__consumer_offsets")
    return {
        "name": topic_names,
        "names": topic_names,
        "topic": topic_names,
        "partitions": st.one_of(st.integers(-1, 4), int32s),
        "timeout_ms": st.sampled_from((0, -1, 1, INT32_MIN)),  # 1 ms: answered in time or not
    }


def _CONFIG_OVERRIDES(facts: Facts) -> dict[str, Any]:
    keys = st.one_of(
        st.sampled_from(("retention.ms", "min.insync.replicas", "cleanup.policy")), nasty_texts
    )
    return {**_ADMIN_NAMES(facts), "keys": keys, "AlterableConfig.name": keys}


# ---- ControllerService ----


@st.composite
def _register_broker(draw: st.DrawFn, facts: Facts) -> Message:
    request = draw(message_of(controller_pb2.BrokerRegistrationRequest.DESCRIPTOR))
    assert isinstance(request, controller_pb2.BrokerRegistrationRequest)
    defect = draw(st.sampled_from(("cluster", "id", "incarnation", "listeners", "duplicate")))
    request.cluster_id = "test-cluster"
    request.incarnation_id = str(uuid.UUID(int=draw(st.integers(0, 2**128 - 1))))
    if defect == "cluster":
        request.cluster_id = draw(nasty_texts.filter(lambda text: text != "test-cluster"))
    elif defect == "id":
        request.broker_id = draw(st.sampled_from((-1, -2, INT32_MIN)))
    elif defect == "incarnation":
        request.incarnation_id = draw(st.sampled_from(("", "not-a-uuid", "x" * 36)))
    elif defect == "listeners":
        del request.listeners[:]
    else:  # a live broker registering again with another incarnation: its session is alive
        request.broker_id = draw(st.sampled_from(sorted(facts.broker_epochs)))
    return request


@st.composite
def _with_bad_broker_epoch(draw: st.DrawFn, descriptor: Descriptor, facts: Facts) -> Message:
    request = draw(message_of(descriptor, _CONTROLLER_OVERRIDES(facts)))
    request.broker_id, request.broker_epoch = draw(  # type: ignore[attr-defined]
        _broker_and_bad_epoch(facts)
    )
    return request


@st.composite
def _alter_partition(draw: st.DrawFn, facts: Facts) -> Message:
    """From the partition's real leader with its real epoch, one thing wrong: the leader or
    partition epoch of every item, the topic id; or the broker epoch itself."""
    request = draw(
        message_of(controller_pb2.AlterPartitionRequest.DESCRIPTOR, _CONTROLLER_OVERRIDES(facts))
    )
    assert isinstance(request, controller_pb2.AlterPartitionRequest)
    (topic, partition), (leader, leader_epoch, partition_epoch) = draw(
        st.sampled_from(sorted(facts.leaders.items()))
    )
    request.broker_id, request.broker_epoch = leader, facts.broker_epochs[leader]
    del request.topics[:]  # only the partition aimed at, so the defect covers every item
    defect = draw(st.sampled_from(("leader_epoch", "partition_epoch", "topic_id", "broker")))
    entry = request.topics.add(topic_id=facts.topics[topic])
    item = entry.partitions.add()  # a drawn item (its new ISR), aimed at the partition
    item.MergeFromString(
        draw(message_of(controller_pb2.AlterPartitionItem.DESCRIPTOR)).SerializeToString()
    )
    item.partition, item.leader_epoch = partition, leader_epoch
    item.partition_epoch = partition_epoch
    for entry in request.topics:
        if defect == "topic_id":
            entry.topic_id = draw(st.sampled_from(("", "x", str(uuid.UUID(int=7)))))
        for each in entry.partitions:
            if defect == "leader_epoch":
                each.leader_epoch = draw(_stale_or_future(leader_epoch))
            elif defect == "partition_epoch":
                each.partition_epoch = draw(_stale_or_future(partition_epoch))
    if defect == "broker":
        request.broker_id, request.broker_epoch = draw(_broker_and_bad_epoch(facts))
    return request


def _CONTROLLER_OVERRIDES(facts: Facts) -> dict[str, Any]:
    return {
        "topic_id": st.one_of(st.sampled_from(sorted(facts.topics.values())), nasty_texts),
        "max_wait_ms": st.sampled_from((INT32_MIN, -1, 0, 1, 10)),
        "broker_id": st.one_of(st.sampled_from(sorted(facts.broker_epochs)), int32s),
        "partition": st.one_of(st.integers(-1, 3), int32s),
    }


# ---- BrokerService: data plane ----


@st.composite
def _produce(draw: st.DrawFn, facts: Facts) -> Message:
    """Corrupt batches to real partitions under valid acks; anything to the wrong places."""
    request = broker_pb2.ProduceRequest(
        acks=draw(st.one_of(st.sampled_from((-1, 0, 1)), int32s)),
        timeout_ms=draw(st.sampled_from((0, -1, 1, 1000, INT32_MIN, INT32_MAX))),
    )
    valid_acks = request.acks in (-1, 0, 1)
    for _ in range(draw(st.sampled_from((0, 1, 1, 2, 3)))):
        name = draw(names(*facts.topics))
        topic = request.topics.add(topic=name)
        for _ in range(draw(st.sampled_from((0, 1, 1, 2, 40)))):
            partition = draw(st.one_of(st.integers(-1, 3), int32s))
            real = partition in range(facts.partitions.get(name, 0))
            records = corrupt_records if real and valid_acks else any_records
            topic.partitions.add(partition=partition, records=draw(records))
    return request


def _BROKER_OVERRIDES(facts: Facts) -> dict[str, Any]:
    epochs = st.one_of(st.sampled_from((-1, 0, 1, 2, 1000)), int32s)
    return {
        "topic": names(*facts.topics),
        "topics": names(*facts.topics),
        "partition": st.one_of(st.integers(-1, 3), int32s),
        "current_leader_epoch": epochs,
        "last_fetched_epoch": epochs,
        # a follower id would move the leader's view of a real replica: ids no broker has
        "replica_id": st.sampled_from((-1, -1, -2, 0, 42, INT32_MAX, INT32_MIN)),
        "max_wait_ms": st.sampled_from((INT32_MIN, -1, 0, 1, 20)),
        "fetch_offset": st.one_of(st.sampled_from((-1, 0, 1, 2**40)), int64s),
        "transactional_id": st.sampled_from(("", "", "tx", "x" * 1000)),
    }


# ---- BrokerService: groups ----


@st.composite
def _group_heartbeat(draw: st.DrawFn, facts: Facts) -> Message:
    request = draw(
        message_of(group_pb2.ConsumerGroupHeartbeatRequest.DESCRIPTOR, _GROUP_OVERRIDES(facts))
    )
    assert isinstance(request, group_pb2.ConsumerGroupHeartbeatRequest)
    defect = draw(
        st.sampled_from(("group", "member", "epoch", "both", "empty", "timeout", "regex",
                         "assignor", "unknown"))
    )  # fmt: skip
    if defect == "group":
        request.group_id = ""
    elif defect == "member":
        request.member_id = ""
    elif defect == "epoch":
        request.member_epoch = draw(st.sampled_from((-3, -1000, INT32_MIN)))
    elif defect == "both":
        request.subscribed_topic_names.append(draw(names(*facts.topics)))
        request.subscribed_topic_regex = draw(st.sampled_from((".*", "f.*", "(")))
    elif defect == "empty":  # joining without a subscription
        request.member_epoch = 0
        del request.subscribed_topic_names[:]
        request.subscribed_topic_regex = ""
    elif defect == "timeout":
        request.member_epoch = 0
        request.rebalance_timeout_ms = draw(st.sampled_from((0, -1, INT32_MIN)))
    elif defect == "regex":
        request.subscribed_topic_regex = draw(st.sampled_from(("(", "[a-", "*", "a{2,1}", "(?P<")))
        del request.subscribed_topic_names[:]
    elif defect == "assignor":
        request.server_assignor = draw(
            nasty_texts.filter(lambda text: text not in ("", "uniform", "range"))
        )
    else:  # a member nobody knows, heartbeating or leaving with an epoch it was never given
        request.member_epoch = draw(st.sampled_from((-2, -1, 1, 7, INT32_MAX)))
    return request


@st.composite
def _offset_commit(draw: st.DrawFn, facts: Facts) -> Message:
    request = draw(message_of(group_pb2.OffsetCommitRequest.DESCRIPTOR, _GROUP_OVERRIDES(facts)))
    assert isinstance(request, group_pb2.OffsetCommitRequest)
    defect = draw(st.sampled_from(("group", "member", "items")))
    if defect == "group":
        request.group_id = ""
    elif defect == "member":  # the groups have no members
        request.member_id = draw(nasty_texts.filter(lambda text: text != ""))
    else:  # an admin commit whose every item is wrong
        request.member_id = ""
        for topic in request.topics:
            for item in topic.partitions:
                what = draw(st.sampled_from(("partition", "offset", "metadata")))
                if what == "partition" or topic.topic not in facts.partitions:
                    item.partition = draw(st.sampled_from((-1, 3, 99, INT32_MAX, INT32_MIN)))
                elif what == "offset":
                    item.committed_offset = draw(st.sampled_from((-1, -2, -(2**63))))
                else:
                    item.committed_metadata = "m" * 4097
    return request


@st.composite
def _delete_groups(draw: st.DrawFn, facts: Facts) -> Message:
    overrides = {**_GROUP_OVERRIDES(facts), "group_ids": _missing(facts)}
    return draw(message_of(group_pb2.DeleteGroupsRequest.DESCRIPTOR, overrides))


def _GROUP_OVERRIDES(facts: Facts) -> dict[str, Any]:
    groups = names(facts.group)
    return {
        "group_id": groups,
        "group_ids": groups,
        "key": groups,
        "topic": names(*facts.topics),
        "subscribed_topic_names": names(*facts.topics),
        "partition": st.one_of(st.integers(-1, 3), int32s),
        "partitions": st.one_of(st.integers(-1, 3), int32s),
        "states_filter": st.one_of(
            st.sampled_from(("Empty", "Stable", "Assigning", "Reconciling", "Dead")), nasty_texts
        ),
    }


_NO_VOTER: dict[str, Any] = {
    "voter_id": st.integers(-(2**31), -1),
    "raft_address": names(),
    "listener": names(),
}


def fuzzers(facts: Facts) -> dict[str, Fuzz]:
    """Every RPC's fuzzer; tests/fuzz/test_fuzz_coverage.py fails when one is missing."""
    broker = _BROKER_OVERRIDES(facts)
    groups = _GROUP_OVERRIDES(facts)
    admin = _ADMIN_NAMES(facts)
    epoch_fuzz = _with_bad_broker_epoch
    return {
        "AdminService.CreateTopics": Fuzz(_create_topics(facts), _unless_validate_only),
        "AdminService.DeleteTopics": Fuzz(
            message_of(admin_pb2.DeleteTopicsRequest.DESCRIPTOR, {"names": _missing(facts)}),
            _always,
        ),
        "AdminService.CreatePartitions": Fuzz(_create_partitions(facts), _unless_validate_only),
        "AdminService.DescribeTopics": _read(admin_pb2.DescribeTopicsRequest.DESCRIPTOR, admin),
        "AdminService.DescribeConfigs": _read(
            admin_pb2.DescribeConfigsRequest.DESCRIPTOR, _CONFIG_OVERRIDES(facts)
        ),
        "AdminService.IncrementalAlterConfigs": Fuzz(_alter_configs(facts), _unless_validate_only),
        "AdminService.DescribeCluster": _read(admin_pb2.DescribeClusterRequest.DESCRIPTOR, {}),
        "AdminService.DescribeQuorum": _read(admin_pb2.DescribeQuorumRequest.DESCRIPTOR, {}),
        "AdminService.ElectLeaders": Fuzz(_elect_leaders(facts), _always),
        # Refused: a negative id and addresses without a port; a Raft address that is no voter's.
        "AdminService.AddRaftVoter": Fuzz(
            message_of(admin_pb2.AddRaftVoterRequest.DESCRIPTOR, _NO_VOTER), _always
        ),
        "AdminService.RemoveRaftVoter": Fuzz(
            message_of(admin_pb2.RemoveRaftVoterRequest.DESCRIPTOR, _NO_VOTER), _always
        ),
        "AdminService.AlterPartitionReassignments": Fuzz(_reassignments(facts), _always),
        "AdminService.ListPartitionReassignments": _read(
            admin_pb2.ListPartitionReassignmentsRequest.DESCRIPTOR, {"topics": admin["topic"]}
        ),
        # Every broker of the fuzzed cluster runs, so each is refused (stop it first).
        "AdminService.UnregisterBroker": Fuzz(
            message_of(admin_pb2.UnregisterBrokerRequest.DESCRIPTOR, {}), _always
        ),
        "ControllerService.RegisterBroker": Fuzz(_register_broker(facts), _always),
        "ControllerService.BrokerHeartbeat": Fuzz(
            epoch_fuzz(controller_pb2.BrokerHeartbeatRequest.DESCRIPTOR, facts), _always
        ),
        # A stale or unknown epoch only: a session the node took would fence a real broker.
        "ControllerService.BrokerSession": Fuzz(
            epoch_fuzz(controller_pb2.BrokerSessionRequest.DESCRIPTOR, facts), _always
        ),
        "ControllerService.AlterPartition": Fuzz(_alter_partition(facts), _always),
        "ControllerService.AllocateProducerIds": Fuzz(
            epoch_fuzz(controller_pb2.AllocateProducerIdsRequest.DESCRIPTOR, facts), _always
        ),
        "ControllerService.MetadataFetch": _read(
            controller_pb2.MetadataFetchRequest.DESCRIPTOR, _CONTROLLER_OVERRIDES(facts)
        ),
        "BrokerService.Produce": Fuzz(_produce(facts), _always),
        "BrokerService.Fetch": _read(broker_pb2.FetchRequest.DESCRIPTOR, broker),
        "BrokerService.ListOffsets": _read(broker_pb2.ListOffsetsRequest.DESCRIPTOR, broker),
        "BrokerService.Metadata": _read(broker_pb2.MetadataRequest.DESCRIPTOR, broker),
        "BrokerService.DescribeCounters": _read(
            broker_pb2.DescribeCountersRequest.DESCRIPTOR, broker
        ),
        # Without a transactional id it is valid and hands out an id (the warm-up took a block)
        "BrokerService.InitProducerId": Fuzz(
            message_of(broker_pb2.InitProducerIdRequest.DESCRIPTOR, broker),
            lambda request: bool(field_of(request, "transactional_id")),
        ),
        "BrokerService.FindCoordinator": _read(group_pb2.FindCoordinatorRequest.DESCRIPTOR, groups),
        "BrokerService.ConsumerGroupHeartbeat": Fuzz(_group_heartbeat(facts), _always),
        "BrokerService.OffsetCommit": Fuzz(_offset_commit(facts), _always),
        "BrokerService.OffsetFetch": _read(group_pb2.OffsetFetchRequest.DESCRIPTOR, groups),
        "BrokerService.ListGroups": _read(group_pb2.ListGroupsRequest.DESCRIPTOR, groups),
        "BrokerService.ConsumerGroupDescribe": _read(
            group_pb2.ConsumerGroupDescribeRequest.DESCRIPTOR, groups
        ),
        "BrokerService.DeleteGroups": Fuzz(_delete_groups(facts), _always),
    }
