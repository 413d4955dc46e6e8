"""Hypothesis strategies for metadata records: arbitrary ones for the codec, and valid histories
(sequences a controller could have written) for replay."""

from __future__ import annotations

import dataclasses
from uuid import UUID

from hypothesis import strategies as st

from pykraft.metadata_log.records import (
    METADATA_VERSION_FEATURE,
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
TEXT = st.text(max_size=12)
INT_TUPLES = st.lists(INT32, max_size=5).map(tuple)

ENDPOINTS = st.builds(Endpoint, TEXT, TEXT, INT32, TEXT)

RECORDS_BY_CLASS: dict[type[Record], st.SearchStrategy[Record]] = {
    RegisterBrokerRecord: st.builds(
        RegisterBrokerRecord,
        INT32,
        st.uuids(),
        INT64,
        st.lists(ENDPOINTS, max_size=3).map(tuple),
        st.none() | TEXT,
        st.booleans(),
        st.booleans(),
    ),
    UnregisterBrokerRecord: st.builds(UnregisterBrokerRecord, INT32, INT64),
    BrokerRegistrationChangeRecord: st.builds(
        BrokerRegistrationChangeRecord,
        INT32,
        INT64,
        st.none() | st.booleans(),
        st.none() | st.booleans(),
    ),
    TopicRecord: st.builds(TopicRecord, TEXT, st.uuids()),
    PartitionRecord: st.builds(
        PartitionRecord,
        st.uuids(),
        INT32,
        INT_TUPLES,
        INT_TUPLES,
        INT32,
        INT32,
        INT32,
        INT_TUPLES,
        INT_TUPLES,
    ),
    PartitionChangeRecord: st.builds(
        PartitionChangeRecord,
        st.uuids(),
        INT32,
        st.none() | INT_TUPLES,
        st.none() | INT32,
        st.none() | INT_TUPLES,
        st.none() | INT_TUPLES,
        st.none() | INT_TUPLES,
    ),
    ConfigRecord: st.builds(
        ConfigRecord, st.sampled_from(ConfigResourceType), TEXT, TEXT, st.none() | TEXT
    ),
    RemoveTopicRecord: st.builds(RemoveTopicRecord, st.uuids()),
    ProducerIdsRecord: st.builds(ProducerIdsRecord, INT32, INT64, INT64),
    FeatureLevelRecord: st.builds(FeatureLevelRecord, TEXT, INT32),
    NoOpRecord: st.just(NoOpRecord()),
}

ANY_RECORD: st.SearchStrategy[Record] = st.one_of(*RECORDS_BY_CLASS.values())

# Small pools, so that histories revisit the same brokers, names and keys.
_BROKER_IDS = range(5)
_TOPIC_NAMES = ("a", "b", "c", "d")
_PARTITION_IDS = range(3)
_CONFIG_KEYS = ("retention.ms", "segment.bytes", "cleanup.policy")
_FEATURES = (METADATA_VERSION_FEATURE, "group.version")


@dataclasses.dataclass
class _Model:
    """What the history so far has made true, to pick only records that can apply."""

    broker_epochs: dict[int, int] = dataclasses.field(default_factory=dict)
    topics: dict[UUID, tuple[str, set[int]]] = dataclasses.field(default_factory=dict)
    used_topic_ids: set[UUID] = dataclasses.field(default_factory=set)
    next_producer_id: int = 0


def _register(draw: st.DrawFn, model: _Model) -> list[Record]:
    broker_id = draw(st.sampled_from(_BROKER_IDS))
    epoch = model.broker_epochs.get(broker_id, 0) + draw(st.integers(1, 3))
    model.broker_epochs[broker_id] = epoch
    endpoint = Endpoint("PLAINTEXT", f"host{broker_id}", 9092 + broker_id)
    rack = draw(st.none() | st.sampled_from(("r1", "r2")))
    fenced, shutting_down = draw(st.booleans()), draw(st.booleans())
    return [
        RegisterBrokerRecord(
            broker_id, draw(st.uuids()), epoch, (endpoint,), rack, fenced, shutting_down
        )
    ]


def _unregister(draw: st.DrawFn, model: _Model) -> list[Record]:
    broker_id = draw(st.sampled_from(sorted(model.broker_epochs)))
    return [UnregisterBrokerRecord(broker_id, model.broker_epochs.pop(broker_id))]


def _change_broker(draw: st.DrawFn, model: _Model) -> list[Record]:
    broker_id = draw(st.sampled_from(sorted(model.broker_epochs)))
    fenced = draw(st.none() | st.booleans())
    shutting_down = draw(st.none() | st.booleans())
    epoch = model.broker_epochs[broker_id]
    return [BrokerRegistrationChangeRecord(broker_id, epoch, fenced, shutting_down)]


def _partition(draw: st.DrawFn, topic_id: UUID, partition_id: int) -> PartitionRecord:
    replicas = tuple(draw(st.lists(st.sampled_from(_BROKER_IDS), unique=True, max_size=3)))
    isr = tuple(broker for broker in replicas if draw(st.booleans()))
    leader = draw(st.sampled_from((NO_LEADER, *isr)))
    epochs = st.integers(0, 5)
    return PartitionRecord(
        topic_id, partition_id, replicas, isr, leader, draw(epochs), draw(epochs)
    )


def _create_topic(draw: st.DrawFn, model: _Model) -> list[Record]:
    taken = {name for name, _ in model.topics.values()}
    name = draw(st.sampled_from([name for name in _TOPIC_NAMES if name not in taken]))
    topic_id = draw(st.uuids().filter(lambda candidate: candidate not in model.used_topic_ids))
    model.used_topic_ids.add(topic_id)
    count = draw(st.integers(0, len(_PARTITION_IDS)))
    model.topics[topic_id] = (name, set(range(count)))
    partitions = [_partition(draw, topic_id, partition_id) for partition_id in range(count)]
    return [TopicRecord(name, topic_id), *partitions]


def _set_partition(draw: st.DrawFn, model: _Model) -> list[Record]:
    topic_id = draw(st.sampled_from(sorted(model.topics)))
    partition_id = draw(st.sampled_from(_PARTITION_IDS))
    model.topics[topic_id][1].add(partition_id)
    return [_partition(draw, topic_id, partition_id)]


def _change_partition(draw: st.DrawFn, model: _Model) -> list[Record]:
    choices = sorted((tid, pid) for tid, (_, pids) in model.topics.items() for pid in pids)
    topic_id, partition_id = draw(st.sampled_from(choices))
    brokers = st.lists(st.sampled_from(_BROKER_IDS), unique=True, max_size=3).map(tuple)
    return [
        PartitionChangeRecord(
            topic_id,
            partition_id,
            isr=draw(st.none() | brokers),
            leader=draw(st.none() | st.sampled_from((NO_LEADER, *_BROKER_IDS))),
            replicas=draw(st.none() | brokers),
        )
    ]


def _config(draw: st.DrawFn, model: _Model) -> list[Record]:
    resource_type = draw(st.sampled_from(ConfigResourceType))
    names = _TOPIC_NAMES if resource_type is ConfigResourceType.TOPIC else ("0", "1")
    value = draw(st.none() | st.sampled_from(("1", "2", "compact")))
    return [
        ConfigRecord(
            resource_type, draw(st.sampled_from(names)), draw(st.sampled_from(_CONFIG_KEYS)), value
        )
    ]


def _remove_topic(draw: st.DrawFn, model: _Model) -> list[Record]:
    topic_id = draw(st.sampled_from(sorted(model.topics)))
    del model.topics[topic_id]
    return [RemoveTopicRecord(topic_id)]


def _producer_ids(draw: st.DrawFn, model: _Model) -> list[Record]:
    model.next_producer_id += draw(st.integers(0, 1000))
    broker_id = draw(st.sampled_from(_BROKER_IDS))
    return [ProducerIdsRecord(broker_id, 1, model.next_producer_id)]


def _feature(draw: st.DrawFn, model: _Model) -> list[Record]:
    return [FeatureLevelRecord(draw(st.sampled_from(_FEATURES)), draw(st.integers(0, 3)))]


def _no_op(draw: st.DrawFn, model: _Model) -> list[Record]:
    return [NoOpRecord()]


@st.composite
def valid_histories(draw: st.DrawFn, max_steps: int = 25) -> list[Record]:
    """A record sequence every prefix of which replays cleanly onto the empty image."""
    model = _Model()
    records: list[Record] = []
    for _ in range(draw(st.integers(0, max_steps))):
        steps = [_register, _config, _producer_ids, _feature, _no_op]
        if model.broker_epochs:
            steps += [_unregister, _change_broker]
        if len(model.topics) < len(_TOPIC_NAMES):
            steps.append(_create_topic)
        if model.topics:
            steps += [_set_partition, _remove_topic]
        if any(partitions for _, partitions in model.topics.values()):
            steps.append(_change_partition)
        step = draw(st.sampled_from(steps))
        records += step(draw, model)
    return records
