from __future__ import annotations

from uuid import UUID

import pytest

from pykraft.metadata_log.image import PartitionRegistration
from pykraft.metadata_log.records import PartitionChangeRecord
from pykraft.proto import common_pb2, controller_pb2
from pykraft.quorum.controller import alter_partition
from tests.unit.quorum.controller.conftest import (
    after,
    broker,
    broker_epoch,
    brokers,
    image_with,
    topic,
)

TOPIC_ID = UUID(int=9)
# Partition 0: replicas 1, 2, 3, all in sync, 1 leads at leader epoch 4, partition epoch 7.
PARTITION = PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 4, 7)
IMAGE = image_with(*brokers(1, 2, 3, 4), *topic("t", TOPIC_ID, [PARTITION, PARTITION]))


def request(
    *items: controller_pb2.AlterPartitionItem,
    broker_id: int = 1,
    epoch: int | None = None,
    topic_id: str = str(TOPIC_ID),
) -> controller_pb2.AlterPartitionRequest:
    return controller_pb2.AlterPartitionRequest(
        broker_id=broker_id,
        broker_epoch=broker_epoch(broker_id) if epoch is None else epoch,
        topics=[controller_pb2.AlterPartitionTopic(topic_id=topic_id, partitions=items)],
    )


def item(
    new_isr: tuple[int, ...],
    *,
    partition: int = 0,
    leader_epoch: int = 4,
    partition_epoch: int = 7,
    broker_epochs: dict[int, int] | None = None,
) -> controller_pb2.AlterPartitionItem:
    """`new_isr` with each member's registered broker epoch, or the given `broker_epochs`."""
    epochs = broker_epochs or {}
    return controller_pb2.AlterPartitionItem(
        partition=partition,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
        new_isr_with_epochs=[
            controller_pb2.BrokerState(broker_id=b, broker_epoch=epochs.get(b, broker_epoch(b)))
            for b in new_isr
        ],
    )


def test_isr_shrink_writes_a_change_and_answers_the_partition_as_it_will_be() -> None:
    result = alter_partition(IMAGE, request(item((1, 3))))

    assert result.records == (PartitionChangeRecord(TOPIC_ID, 0, isr=(1, 3)),)
    (answer,) = result.response.partitions
    assert answer.error_code == common_pb2.NONE
    assert (answer.leader, answer.leader_epoch, answer.partition_epoch) == (1, 4, 8)
    assert list(answer.isr) == [1, 3]
    assert after(IMAGE, result).topics.by_id[TOPIC_ID].partitions[0] == PartitionRegistration(
        (1, 2, 3), (1, 3), 1, 4, 8
    )


def test_same_isr_writes_nothing_and_answers_the_current_state() -> None:
    result = alter_partition(IMAGE, request(item((1, 2, 3))))
    assert result.records == ()
    assert result.response.partitions[0].partition_epoch == 7


@pytest.mark.parametrize(
    ("broker_id", "epoch", "code"),
    [
        (9, 109, common_pb2.BROKER_ID_NOT_REGISTERED),
        (1, broker_epoch(1) - 1, common_pb2.STALE_BROKER_EPOCH),
    ],
)
def test_unknown_broker_or_stale_broker_epoch_fails_the_request(
    broker_id: int, epoch: int, code: int
) -> None:
    result = alter_partition(IMAGE, request(item((1,)), broker_id=broker_id, epoch=epoch))
    assert result.response.header.error_code == code
    assert result.records == () and not result.response.partitions


@pytest.mark.parametrize(
    ("sender", "bad", "code"),
    [
        (2, item((1, 2)), common_pb2.NOT_LEADER_OR_FOLLOWER),
        (1, item((1, 2), leader_epoch=3), common_pb2.FENCED_LEADER_EPOCH),
        (1, item((1, 2), leader_epoch=5), common_pb2.UNKNOWN_LEADER_EPOCH),
        (1, item((1, 2), partition_epoch=6), common_pb2.INVALID_UPDATE_VERSION),
        (1, item((1, 2), partition_epoch=8), common_pb2.INVALID_UPDATE_VERSION),
        (1, item((2, 3)), common_pb2.INVALID_REQUEST),
        (1, item((1, 4)), common_pb2.INVALID_REQUEST),
        (1, item((1, 1)), common_pb2.INVALID_REQUEST),
        (1, item((1, 2), partition=5), common_pb2.UNKNOWN_TOPIC_OR_PARTITION),
    ],
)
def test_bad_item_fails_alone_without_records(
    sender: int, bad: controller_pb2.AlterPartitionItem, code: int
) -> None:
    good = item((sender, 3), partition=1)
    result = alter_partition(IMAGE, request(bad, good, broker_id=sender))

    failed, other = result.response.partitions
    assert failed.error_code == code and failed.error_message
    if sender == 1:
        assert other.error_code == common_pb2.NONE
        assert result.records == (PartitionChangeRecord(TOPIC_ID, 1, isr=(1, 3)),)
    else:
        assert other.error_code == common_pb2.NOT_LEADER_OR_FOLLOWER
        assert result.records == ()


def test_fenced_or_shutting_down_broker_cannot_join_the_isr() -> None:
    shrunk = PartitionRegistration((1, 2, 3), (1,), 1, 4, 7)
    image = image_with(
        *topic("u", UUID(int=10), [shrunk]),
        broker(2, fenced=True),
        broker(3, in_controlled_shutdown=True),
        base=IMAGE,
    )
    for joiner in (2, 3):
        result = alter_partition(image, request(item((1, joiner)), topic_id=str(UUID(int=10))))
        assert result.response.partitions[0].error_code == common_pb2.INELIGIBLE_REPLICA
        assert result.records == ()


def test_unknown_topic_id_and_duplicate_partition() -> None:
    unknown = alter_partition(IMAGE, request(item((1,)), topic_id=str(UUID(int=77))))
    assert unknown.response.partitions[0].error_code == common_pb2.UNKNOWN_TOPIC_ID
    twice = alter_partition(IMAGE, request(item((1, 2)), item((1, 3))))
    assert [p.error_code for p in twice.response.partitions] == [0, common_pb2.INVALID_REQUEST]
    assert twice.records == (PartitionChangeRecord(TOPIC_ID, 0, isr=(1, 2)),)


def test_a_member_with_a_stale_broker_epoch_is_ineligible() -> None:
    """KIP-903: a fetch from a previous incarnation of broker 3 (which may have lost what it had
    not flushed) cannot bring the new incarnation into the ISR."""
    shrunk = image_with(PartitionChangeRecord(TOPIC_ID, 0, isr=(1, 2)), base=IMAGE)
    stale = alter_partition(
        shrunk, request(item((1, 2, 3), partition_epoch=8, broker_epochs={3: broker_epoch(3) - 1}))
    )
    (answer,) = stale.response.partitions
    assert answer.error_code == common_pb2.INELIGIBLE_REPLICA and not stale.records
    assert "broker 3 fetched with epoch" in answer.error_message
    unknown = alter_partition(
        shrunk, request(item((1, 2, 3), partition_epoch=8, broker_epochs={3: -1}))
    )
    assert unknown.response.partitions[0].error_code == common_pb2.NONE  # -1: not checked
