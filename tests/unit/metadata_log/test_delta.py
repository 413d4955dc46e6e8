from __future__ import annotations

import tracemalloc
from uuid import UUID

import pytest

from pykraft.metadata_log.delta import MetadataDelta
from pykraft.metadata_log.errors import InvariantError, MetadataReplayError
from pykraft.metadata_log.image import BrokerRegistration, MetadataImage, PartitionRegistration
from pykraft.metadata_log.records import (
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

FOO = UUID(int=1)
BAR = UUID(int=2)
TOPIC = ConfigResourceType.TOPIC
BROKER = ConfigResourceType.BROKER
ENDPOINT = Endpoint("PLAINTEXT", "localhost", 9092)


def apply(image: MetadataImage, *records: Record) -> MetadataImage:
    """`image` after `records`, one delta, each record at the next offset."""
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)
    return delta.apply(offset=image.offset + len(records), epoch=max(image.epoch, 1))


def register(broker_id: int, epoch: int = 10, *, fenced: bool = True) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id, UUID(int=100 + broker_id), epoch, (ENDPOINT,), None, fenced
    )


def partition(topic_id: UUID, partition_id: int, leader: int = 1) -> PartitionRecord:
    return PartitionRecord(topic_id, partition_id, (1, 2, 3), (1, 2, 3), leader, 5, 7)


def two_topics() -> MetadataImage:
    return apply(
        MetadataImage.EMPTY,
        register(1),
        TopicRecord("foo", FOO),
        partition(FOO, 0),
        partition(FOO, 1),
        TopicRecord("bar", BAR),
        partition(BAR, 0),
        ConfigRecord(TOPIC, "foo", "retention.ms", "1000"),
        ConfigRecord(TOPIC, "bar", "retention.ms", "2000"),
    )


def test_replay_error_is_an_invariant_error() -> None:
    assert issubclass(MetadataReplayError, InvariantError)
    assert issubclass(InvariantError, AssertionError)


class TestBrokers:
    def test_register_broker_replaces_the_registration(self) -> None:
        image = apply(MetadataImage.EMPTY, register(1, epoch=10))
        assert image.cluster.broker(1) == BrokerRegistration(
            1, UUID(int=101), 10, (ENDPOINT,), None, fenced=True, in_controlled_shutdown=False
        )
        again = RegisterBrokerRecord(1, UUID(int=9), 11, (), "r1", fenced=False)
        broker = apply(image, again).cluster.broker(1)
        assert broker == BrokerRegistration(1, UUID(int=9), 11, (), "r1", False, False)

    def test_unregister_removes_the_broker_when_the_epoch_matches(self) -> None:
        image = apply(MetadataImage.EMPTY, register(1, epoch=10), register(2))
        after = apply(image, UnregisterBrokerRecord(1, 10))
        assert after.cluster.broker(1) is None
        assert list(after.cluster.brokers) == [2]

    @pytest.mark.parametrize(
        "record", [UnregisterBrokerRecord(1, 9), UnregisterBrokerRecord(3, 10)]
    )
    def test_unregister_of_another_epoch_or_unknown_broker_fails(
        self, record: UnregisterBrokerRecord
    ) -> None:
        image = apply(MetadataImage.EMPTY, register(1, epoch=10))
        with pytest.raises(MetadataReplayError, match="no broker"):
            apply(image, record)

    def test_registration_change_sets_only_the_flags_given(self) -> None:
        image = apply(MetadataImage.EMPTY, register(1, epoch=10, fenced=True))
        unfenced = apply(image, BrokerRegistrationChangeRecord(1, 10, fenced=False))
        broker = unfenced.cluster.broker(1)
        assert broker is not None
        assert (broker.fenced, broker.in_controlled_shutdown) == (False, False)
        shutting = apply(unfenced, BrokerRegistrationChangeRecord(1, 10, None, True))
        broker = shutting.cluster.broker(1)
        assert broker is not None
        assert (broker.fenced, broker.in_controlled_shutdown) == (False, True)
        unchanged = apply(shutting, BrokerRegistrationChangeRecord(1, 10))
        assert unchanged.cluster == shutting.cluster

    @pytest.mark.parametrize(
        "record",
        [BrokerRegistrationChangeRecord(2, 10, fenced=False), BrokerRegistrationChangeRecord(1, 9)],
    )
    def test_registration_change_of_unknown_broker_or_epoch_fails(
        self, record: BrokerRegistrationChangeRecord
    ) -> None:
        image = apply(MetadataImage.EMPTY, register(1, epoch=10))
        with pytest.raises(MetadataReplayError, match="no broker"):
            apply(image, record)

    def test_unfenced_broker_ids_skip_fenced_and_shutting_down_brokers(self) -> None:
        image = apply(
            MetadataImage.EMPTY,
            register(5, fenced=False),
            register(3, fenced=False),
            register(4, fenced=True),
            register(1, fenced=False),
            BrokerRegistrationChangeRecord(1, 10, in_controlled_shutdown=True),
        )
        assert image.cluster.unfenced_broker_ids() == [3, 5]


class TestTopics:
    def test_topic_and_partitions_are_added(self) -> None:
        image = two_topics()
        foo = image.topics.get(FOO)
        assert foo is not None
        assert foo.name == "foo"
        assert dict(foo.partitions) == {
            0: PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 5, 7),
            1: PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 5, 7),
        }
        assert image.topics.get_by_name("bar") == image.topics.get(BAR)

    @pytest.mark.parametrize(
        ("record", "message"),
        [
            (TopicRecord("foo", UUID(int=3)), "topic name 'foo' already exists"),
            (TopicRecord("baz", FOO), "already exists"),
            (partition(UUID(int=3), 0), "no topic"),
            (PartitionChangeRecord(FOO, 9, leader=2), "no partition 9"),
            (PartitionChangeRecord(UUID(int=3), 0, leader=2), "no topic"),
            (RemoveTopicRecord(UUID(int=3)), "no topic"),
        ],
    )
    def test_records_that_cannot_apply_fail(self, record: Record, message: str) -> None:
        with pytest.raises(MetadataReplayError, match=message):
            apply(two_topics(), record)

    def test_a_record_that_fails_leaves_the_delta_as_it_was(self) -> None:
        image = two_topics()
        delta = MetadataDelta(image)
        with pytest.raises(MetadataReplayError):
            delta.replay(PartitionChangeRecord(FOO, 9, leader=2))
        assert delta.changed_topic_ids() == set()
        assert delta.apply(offset=image.offset, epoch=image.epoch).topics is image.topics

    def test_partition_record_sets_the_partition_in_full(self) -> None:
        replacement = PartitionRecord(FOO, 0, (4,), (), NO_LEADER, 0, 0)
        foo = apply(two_topics(), replacement).topics.get(FOO)
        assert foo is not None
        assert foo.partitions[0] == PartitionRegistration((4,), (), NO_LEADER, 0, 0)

    def test_partition_change_applies_the_given_fields_and_bumps_epochs(self) -> None:
        image = two_topics()
        isr_only = apply(image, PartitionChangeRecord(FOO, 0, isr=(1, 2)))
        foo = isr_only.topics.get(FOO)
        assert foo is not None
        assert foo.partitions[0] == PartitionRegistration((1, 2, 3), (1, 2), 1, 5, 8)
        new_leader = apply(isr_only, PartitionChangeRecord(FOO, 0, leader=2, replicas=(2, 1)))
        foo = new_leader.topics.get(FOO)
        assert foo is not None
        assert foo.partitions[0] == PartitionRegistration((2, 1), (1, 2), 2, 6, 9)

    def test_naming_the_same_leader_still_starts_a_new_leader_epoch(self) -> None:
        foo = apply(two_topics(), PartitionChangeRecord(FOO, 0, leader=1)).topics.get(FOO)
        assert foo is not None
        assert (foo.partitions[0].leader, foo.partitions[0].leader_epoch) == (1, 6)

    def test_changes_within_one_delta_build_on_each_other(self) -> None:
        image = apply(
            two_topics(),
            PartitionChangeRecord(FOO, 0, leader=2),
            PartitionChangeRecord(FOO, 0, leader=3),
            PartitionChangeRecord(FOO, 0, isr=(3,)),
        )
        foo = image.topics.get(FOO)
        assert foo is not None
        assert foo.partitions[0] == PartitionRegistration((1, 2, 3), (3,), 3, 7, 10)

    def test_remove_topic_removes_it_its_partitions_and_its_configs(self) -> None:
        image = two_topics()
        delta = MetadataDelta(image)
        delta.replay(RemoveTopicRecord(FOO))
        after = delta.apply(offset=image.offset + 1, epoch=image.epoch)
        assert after.topics.get(FOO) is None
        assert after.topics.get_by_name("foo") is None
        assert after.configs.get(TOPIC, "foo") == {}
        assert after.configs.get(TOPIC, "bar") == {"retention.ms": "2000"}
        assert delta.removed_topic_ids() == {FOO}
        assert delta.changed_topic_ids() == set()

    def test_a_removed_name_can_be_used_again(self) -> None:
        new_id = UUID(int=3)
        image = apply(two_topics(), RemoveTopicRecord(FOO), TopicRecord("foo", new_id))
        foo = image.topics.get_by_name("foo")
        assert foo is not None
        assert (foo.topic_id, dict(foo.partitions)) == (new_id, {})

    def test_topic_created_and_removed_in_one_delta_leaves_no_trace(self) -> None:
        image = two_topics()
        delta = MetadataDelta(image)
        for record in (TopicRecord("baz", UUID(int=3)), partition(UUID(int=3), 0)):
            delta.replay(record)
        assert delta.changed_topic_ids() == {UUID(int=3)}
        delta.replay(RemoveTopicRecord(UUID(int=3)))
        assert delta.changed_topic_ids() == delta.removed_topic_ids() == set()
        assert delta.apply(offset=image.offset, epoch=image.epoch).topics is image.topics

    def test_a_removed_id_coming_back_in_one_delta_matches_record_by_record(self) -> None:
        records: list[Record] = [RemoveTopicRecord(FOO), TopicRecord("baz", FOO), partition(FOO, 4)]
        batched = apply(two_topics(), *records)
        one_by_one = two_topics()
        for record in records:
            one_by_one = apply(one_by_one, record)
        assert batched.topics == one_by_one.topics
        baz = batched.topics.get(FOO)
        assert baz is not None
        assert (baz.name, list(baz.partitions)) == ("baz", [4])

    def test_changed_topic_ids_are_the_created_and_changed_topics(self) -> None:
        delta = MetadataDelta(two_topics())
        delta.replay(PartitionChangeRecord(BAR, 0, isr=(1,)))
        delta.replay(TopicRecord("baz", UUID(int=3)))
        assert delta.changed_topic_ids() == {BAR, UUID(int=3)}
        assert delta.removed_topic_ids() == set()


class TestConfigs:
    def test_config_sets_and_deletes_keys(self) -> None:
        image = apply(
            MetadataImage.EMPTY,
            ConfigRecord(BROKER, "1", "num.partitions", "3"),
            ConfigRecord(BROKER, "1", "log.retention.ms", "10"),
            ConfigRecord(BROKER, "1", "num.partitions", None),
            ConfigRecord(BROKER, "1", "never.set", None),
        )
        assert image.configs.get(BROKER, "1") == {"log.retention.ms": "10"}

    def test_a_resource_without_keys_disappears(self) -> None:
        image = apply(MetadataImage.EMPTY, ConfigRecord(BROKER, "", "num.partitions", "3"))
        empty = apply(image, ConfigRecord(BROKER, "", "num.partitions", None))
        assert (BROKER, "") not in empty.configs.resources
        assert empty.configs == MetadataImage.EMPTY.configs


class TestProducerIdsFeaturesNoOp:
    def test_producer_ids_move_forward_only(self) -> None:
        image = apply(MetadataImage.EMPTY, ProducerIdsRecord(1, 10, 1000))
        assert image.producer_ids.next_producer_id == 1000
        assert apply(image, ProducerIdsRecord(2, 10, 1000)).producer_ids.next_producer_id == 1000
        with pytest.raises(MetadataReplayError, match="go back from 1000"):
            apply(image, ProducerIdsRecord(1, 10, 999))

    def test_feature_level_sets_a_level_and_zero_removes_it(self) -> None:
        image = apply(
            MetadataImage.EMPTY,
            FeatureLevelRecord("metadata.version", 1),
            FeatureLevelRecord("group.version", 2),
        )
        assert dict(image.features.levels) == {"metadata.version": 1, "group.version": 2}
        lowered = apply(image, FeatureLevelRecord("group.version", 0))
        assert dict(lowered.features.levels) == {"metadata.version": 1}

    def test_no_op_changes_nothing_but_the_offset(self) -> None:
        image = two_topics()
        after = apply(image, NoOpRecord())
        assert after.offset == image.offset + 1
        assert after.write() == image.write()
        for part in ("features", "cluster", "topics", "configs", "producer_ids"):
            assert getattr(after, part) is getattr(image, part)


class TestApply:
    def test_offset_and_epoch_must_not_go_back(self) -> None:
        image = MetadataDelta(MetadataImage.EMPTY).apply(offset=10, epoch=3)
        with pytest.raises(MetadataReplayError, match="go back"):
            MetadataDelta(image).apply(offset=9, epoch=3)
        with pytest.raises(MetadataReplayError, match="go back"):
            MetadataDelta(image).apply(offset=11, epoch=2)
        assert MetadataDelta(image).apply(offset=11, epoch=3).offset == 11

    def test_unchanged_parts_are_shared_by_reference(self) -> None:
        image = two_topics()
        after = apply(image, PartitionChangeRecord(FOO, 1, isr=(1,)))
        assert after.topics is not image.topics
        assert after.topics.get(FOO) is not image.topics.get(FOO)
        assert after.topics.get(BAR) is image.topics.get(BAR)
        before_foo, after_foo = image.topics.get(FOO), after.topics.get(FOO)
        assert before_foo is not None and after_foo is not None
        assert after_foo.partitions[0] is before_foo.partitions[0]
        for part in ("features", "cluster", "configs", "producer_ids"):
            assert getattr(after, part) is getattr(image, part)

    def test_each_part_changes_alone(self) -> None:
        image = two_topics()
        broker_change = apply(image, register(2))
        assert broker_change.cluster is not image.cluster
        assert broker_change.topics is image.topics
        config_change = apply(image, ConfigRecord(TOPIC, "bar", "segment.ms", "5"))
        assert config_change.configs is not image.configs
        assert config_change.configs.get(TOPIC, "foo") is image.configs.get(TOPIC, "foo")
        assert config_change.cluster is image.cluster

    def test_apply_leaves_the_delta_usable_and_earlier_images_untouched(self) -> None:
        image = two_topics()
        delta = MetadataDelta(image)
        delta.replay(PartitionChangeRecord(FOO, 0, leader=2))
        first = delta.apply(offset=image.offset + 1, epoch=image.epoch)
        assert delta.apply(offset=image.offset + 1, epoch=image.epoch) == first
        delta.replay(PartitionChangeRecord(FOO, 0, leader=3))
        delta.replay(ConfigRecord(TOPIC, "foo", "retention.ms", None))
        second = delta.apply(offset=image.offset + 2, epoch=image.epoch)
        first_foo, second_foo = first.topics.get(FOO), second.topics.get(FOO)
        assert first_foo is not None and second_foo is not None
        assert (first_foo.partitions[0].leader, second_foo.partitions[0].leader) == (2, 3)
        assert first.configs.get(TOPIC, "foo") == {"retention.ms": "1000"}
        assert delta.image is image


def large_image(topic_count: int, partitions_per_topic: int) -> MetadataImage:
    records: list[Record] = [register(1)]
    for t in range(topic_count):
        topic_id = UUID(int=1000 + t)
        records.append(TopicRecord(f"t{t}", topic_id))
        records += (partition(topic_id, p) for p in range(partitions_per_topic))
    return apply(MetadataImage.EMPTY, *records)


def test_a_small_delta_on_a_large_image_allocates_in_proportion_to_the_change() -> None:
    """Issue 18 §2.1: applying a delta shares the unchanged structure (persistent maps), so its
    cost follows the change, not the image. Copying the 4,000-topic index or the 4,000-partition
    topic allocates about 480 KiB; the trie paths of these four changes about 6 KiB."""
    image = large_image(4_000, 1)
    wide = UUID(int=999)
    image = apply(image, TopicRecord("wide", wide), *(partition(wide, p) for p in range(4_000)))
    changes = (
        TopicRecord("new", UUID(int=998)),
        partition(UUID(int=998), 0),
        PartitionChangeRecord(wide, 7, isr=(1, 2)),
        PartitionChangeRecord(UUID(int=1003), 0, leader=2),
    )
    tracemalloc.start()
    try:
        after = apply(image, *changes)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_bytes < 32 * 1024, f"apply allocated {peak_bytes} bytes"
    assert len(after.topics.by_id) == 4_002
    assert after.topics.by_id[wide].partitions[7].isr == (1, 2)
    assert image.topics.by_id[wide].partitions[7].isr == (1, 2, 3)


def recount(image: MetadataImage) -> tuple[dict[int, int], dict[int, int]]:
    replicas: dict[int, int] = {}
    leaders: dict[int, int] = {}
    for topic in image.topics.by_id.values():
        for registration in topic.partitions.values():
            for broker_id in registration.replicas:
                replicas[broker_id] = replicas.get(broker_id, 0) + 1
            if registration.leader != NO_LEADER:
                leaders[registration.leader] = leaders.get(registration.leader, 0) + 1
    return replicas, leaders


def counts(image: MetadataImage) -> tuple[dict[int, int], dict[int, int]]:
    return dict(image.topics.replica_counts or {}), dict(image.topics.leader_counts or {})


def test_broker_load_counts_follow_every_change() -> None:
    """Replica placement reads each broker's replica and leader counts from the image, kept in
    step by each delta instead of counted over every partition per decision (issue 18 §2.1)."""
    image = apply(
        two_topics(),
        PartitionRecord(FOO, 2, (4, 5, 6), (4, 5), 4, 0, 0),
        PartitionChangeRecord(FOO, 0, leader=NO_LEADER, isr=(2, 3)),
        PartitionChangeRecord(FOO, 1, replicas=(1, 2, 7)),
    )
    assert counts(image) == recount(image)
    assert counts(image)[1] == {1: 2, 4: 1}
    gone = apply(image, RemoveTopicRecord(FOO), TopicRecord("baz", FOO), partition(FOO, 0, 3))
    assert counts(gone) == recount(gone)
    assert 4 not in (gone.topics.replica_counts or {}), "a count at zero leaves the map"
    rebuilt = apply(MetadataImage.EMPTY, *gone.write())
    assert rebuilt.topics == gone.topics


def reindex(image: MetadataImage) -> tuple[dict[int, set[tuple[UUID, int]]], ...]:
    """Both per-broker partition indexes, counted over every partition."""
    in_isr: dict[int, set[tuple[UUID, int]]] = {}
    leaderless: dict[int, set[tuple[UUID, int]]] = {}
    for topic in image.topics.by_id.values():
        for partition_id, registration in topic.partitions.items():
            key = (topic.topic_id, partition_id)
            if registration.leader == NO_LEADER:
                for broker_id in registration.replicas:
                    leaderless.setdefault(broker_id, set()).add(key)
            else:
                for broker_id in registration.isr:
                    in_isr.setdefault(broker_id, set()).add(key)
    return in_isr, leaderless


def indexes(image: MetadataImage) -> tuple[dict[int, set[tuple[UUID, int]]], ...]:
    topics = image.topics
    return tuple(
        {
            broker_id: {(t, p) for t, partition_ids in by_topic.items() for p in partition_ids}
            for broker_id, by_topic in (index or {}).items()
        }
        for index in (topics.isr_index, topics.leaderless_index)
    )


def test_broker_partition_indexes_follow_every_change() -> None:
    """Fencing and unfencing read each broker's partitions from the image's indexes (Kafka's
    BrokersToIsrs), kept in step by each delta instead of found by a scan (issue 18 §3.2)."""
    image = apply(
        two_topics(),
        PartitionRecord(FOO, 2, (4, 5, 6), (4, 5), 4, 0, 0),
        PartitionChangeRecord(FOO, 0, leader=NO_LEADER, isr=(2, 3)),
        PartitionChangeRecord(FOO, 1, replicas=(1, 2, 7), isr=(1, 7)),
    )
    assert indexes(image) == reindex(image)
    assert set(image.topics.partitions_in_isr(4)) == {(FOO, 2)}
    assert set(image.topics.leaderless_partitions(3)) == {(FOO, 0)}
    assert (FOO, 0) not in image.topics.partitions_in_isr(2), "a leaderless partition is not"
    back = apply(image, PartitionChangeRecord(FOO, 0, leader=2))
    assert indexes(back) == reindex(back) and not back.topics.leaderless_index
    gone = apply(image, RemoveTopicRecord(FOO), TopicRecord("baz", FOO), partition(FOO, 0, 3))
    assert indexes(gone) == reindex(gone)
    assert 4 not in (gone.topics.isr_index or {}), "a broker with no partition leaves the index"
    rebuilt = apply(MetadataImage.EMPTY, *gone.write())
    assert rebuilt.topics == gone.topics
