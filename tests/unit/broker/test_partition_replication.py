"""A partition's leader side over a real log: follower fetches move the high-water mark only with
min.insync.replicas in the ISR; ISR proposals shrink laggards and take caught-up replicas back,
one at a time; a new leader epoch forgets followers; the diverging-epoch answer; a follower
fetching through `following` stops writing once it leads."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.broker.local_changes import LocalPartition
from pykraft.broker.log import LogConfig, LogError, PartitionLog
from pykraft.broker.partition import Partition
from pykraft.broker.partition_watches import Change
from pykraft.metadata_log import PartitionRegistration
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import build_batch

TOPIC_ID = uuid.UUID(int=7)
LAG_MS = 1000
# Unfenced brokers and their registered broker epochs.
ELIGIBLE = {1: 1, 2: 2, 3: 3}


def _local(isr: tuple[int, ...], *, leader: int = 1, epoch: int = 0, pe: int = 0) -> LocalPartition:
    registration = PartitionRegistration((1, 2, 3), isr, leader, epoch, pe)
    return LocalPartition("t", TOPIC_ID, 0, registration)


@pytest.fixture
def log(tmp_path: Path) -> Iterator[PartitionLog]:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig.from_topic_configs({}), now_ms=0)
    yield log
    log.close()


def _partition(log: PartitionLog, isr: tuple[int, ...]) -> Partition:
    return Partition(
        _local(isr), log, broker_id=1, min_insync_replicas=2, now_ms=0, on_change=lambda _: None
    )


def _append(partition: Partition, count: int, *, acks: int = -1) -> None:
    batch = build_batch([(i, None, b"v") for i in range(count)])
    partition.append_as_leader(batch, acks=acks, now_ms=0)


def test_high_watermark_follows_the_slowest_in_sync_follower(log: PartitionLog) -> None:
    partition = _partition(log, (1, 2, 3))
    _append(partition, 10)
    assert partition.log.high_watermark == 0
    assert not partition.on_follower_fetch(2, 10, now_ms=1)
    assert partition.on_follower_fetch(3, 6, now_ms=1)
    assert partition.log.high_watermark == 6
    partition.on_follower_fetch(3, 4, now_ms=2)  # a restarted follower: the mark stays
    assert partition.log.high_watermark == 6
    assert not partition.on_follower_fetch(9, 10, now_ms=2)  # not a replica: ignored


def test_no_advance_below_min_insync_replicas(log: PartitionLog) -> None:
    partition = _partition(log, (1,))
    with pytest.raises(LogError) as refused:
        _append(partition, 3)
    assert refused.value.error_code == common_pb2.NOT_ENOUGH_REPLICAS
    _append(partition, 3, acks=1)  # taken, but not committed while the ISR is too small
    assert (partition.log.log_end_offset, partition.log.high_watermark) == (3, 0)


def test_isr_proposals_one_in_flight(log: PartitionLog) -> None:
    partition = _partition(log, (1, 2, 3))
    _append(partition, 5)
    partition.on_follower_fetch(2, 5, now_ms=LAG_MS + 1)
    proposal = partition.propose_isr(now_ms=LAG_MS + 1, lag_time_max_ms=LAG_MS, eligible=ELIGIBLE)
    assert proposal == (1, 2)  # 3 never caught up since the partition was created at 0
    again = partition.propose_isr(now_ms=LAG_MS + 2, lag_time_max_ms=LAG_MS, eligible=ELIGIBLE)
    assert again is None  # in flight until the metadata answers
    partition.update(_local((1, 2), pe=1), min_insync_replicas=2, now_ms=LAG_MS + 2)
    partition.on_follower_fetch(3, 5, now_ms=LAG_MS + 3)
    expand = partition.propose_isr(now_ms=LAG_MS + 3, lag_time_max_ms=LAG_MS, eligible=ELIGIBLE)
    assert expand == (1, 2, 3)
    partition.alter_failed(now_ms=LAG_MS + 3)
    retry = partition.propose_isr(now_ms=LAG_MS + 4, lag_time_max_ms=LAG_MS, eligible={1: 1, 2: 2})
    assert retry is None  # 3 is fenced now: nothing to ask for


def test_new_leader_epoch_forgets_followers(log: PartitionLog) -> None:
    partition = _partition(log, (1, 2, 3))
    _append(partition, 5)
    partition.on_follower_fetch(2, 5, now_ms=1)
    partition.update(_local((1, 2, 3), epoch=1, pe=1), min_insync_replicas=2, now_ms=50)
    assert all(s.log_end_offset == -1 for s in partition.follower_states().values())
    assert all(s.last_caught_up_ms == 50 for s in partition.follower_states().values())


def test_diverging_epoch_and_following(log: PartitionLog) -> None:
    partition = _partition(log, (1, 2, 3))
    _append(partition, 5)  # epoch 0, offsets 0..4
    assert partition.diverging_epoch(0, 5) is None
    assert partition.diverging_epoch(0, 8) == (0, 5)
    assert partition.diverging_epoch(3, 9) == (0, 5)  # an epoch the leader never wrote
    with partition.following(2, 0) as follows:
        assert not follows  # it leads
    partition.update(_local((1, 2, 3), leader=2, epoch=1, pe=1), min_insync_replicas=2, now_ms=9)
    with partition.following(2, 1) as follows:
        assert follows
    with partition.following(2, 0) as follows:
        assert not follows  # a fetch sent in an older epoch


def test_a_follower_refuses_leader_appends_and_no_longer_leads_its_old_epoch(
    log: PartitionLog,
) -> None:
    partition = _partition(log, (1, 2, 3))
    _, epoch = partition.append_as_leader(build_batch([(1, None, b"v")]), acks=1, now_ms=0)
    assert partition.leads_in(epoch)
    partition.update(_local((1, 2, 3), leader=2, epoch=1), min_insync_replicas=2, now_ms=1)
    assert not partition.leads_in(epoch)
    with pytest.raises(LogError) as refused:
        _append(partition, 1, acks=1)
    assert refused.value.error_code == common_pb2.NOT_LEADER_OR_FOLLOWER
    assert partition.log.log_end_offset == 1


def test_a_joiner_in_flight_holds_the_high_watermark_back(log: PartitionLog) -> None:
    """KIP-497's maximal ISR: once the leader asks to add a replica, the high-water mark waits
    for it too, so when the controller commits the larger ISR (and the joiner may be elected)
    it holds every record below the mark (issue 12 §2.4)."""
    partition = _partition(log, (1, 2))
    _append(partition, 5)
    partition.on_follower_fetch(2, 5, now_ms=1)
    partition.on_follower_fetch(3, 5, now_ms=1)  # caught up: may join
    assert partition.log.high_watermark == 5
    proposal = partition.propose_isr(now_ms=2, lag_time_max_ms=LAG_MS, eligible=ELIGIBLE)
    assert proposal == (1, 2, 3)
    _append(partition, 5)
    partition.on_follower_fetch(2, 10, now_ms=3)
    assert partition.log.high_watermark == 5  # 3 has only 5 of the 10
    partition.on_follower_fetch(3, 8, now_ms=3)
    assert partition.log.high_watermark == 8
    partition.alter_failed(now_ms=4)  # refused: the committed ISR alone counts again, at once
    assert partition.log.high_watermark == 10


def test_a_shrink_in_flight_still_waits_for_the_leaving_replica(log: PartitionLog) -> None:
    """Until the controller commits the smaller ISR the leaving replica may still be elected,
    so the high-water mark keeps counting it."""
    partition = _partition(log, (1, 2, 3))
    _append(partition, 5)
    partition.on_follower_fetch(2, 5, now_ms=LAG_MS + 1)
    proposal = partition.propose_isr(now_ms=LAG_MS + 1, lag_time_max_ms=LAG_MS, eligible=ELIGIBLE)
    assert proposal == (1, 2)
    assert partition.log.high_watermark == 0
    partition.update(_local((1, 2), pe=1), min_insync_replicas=2, now_ms=LAG_MS + 2)
    assert partition.log.high_watermark == 5


def test_a_fetch_from_a_previous_incarnation_does_not_bring_a_replica_back(
    log: PartitionLog,
) -> None:
    """KIP-903: broker 3 restarted (now registered with epoch 30) after losing unflushed
    records; a fetch its old incarnation (epoch 3) sent before it died says nothing of what the
    new one holds."""
    partition = _partition(log, (1, 2))
    _append(partition, 5)
    partition.on_follower_fetch(2, 5, now_ms=1, broker_epoch=2)
    partition.on_follower_fetch(3, 5, now_ms=1, broker_epoch=3)
    restarted = {1: 1, 2: 2, 3: 30}
    assert partition.propose_isr(now_ms=2, lag_time_max_ms=LAG_MS, eligible=restarted) is None
    partition.on_follower_fetch(3, 5, now_ms=3, broker_epoch=30)
    assert partition.propose_isr(now_ms=3, lag_time_max_ms=LAG_MS, eligible=restarted) == (1, 2, 3)


def test_a_follower_wakes_its_waiters_only_when_the_leader_mark_moves_its_own(
    log: PartitionLog,
) -> None:
    """An idle partition's fetch answer brings the mark the follower already holds: no change,
    so no wake-up of its waiters (consumers reading from it, KIP-392)."""
    changes: list[Change] = []
    follower = Partition(
        _local((1, 2), leader=2), log, broker_id=1, min_insync_replicas=2, now_ms=0,
        on_change=changes.append,
    )  # fmt: skip
    follower.append_as_follower(build_batch([(0, None, b"v")] * 2), leader_high_watermark=0)
    changes.clear()
    follower.take_leader_high_watermark(1)
    assert follower.high_watermark == 1 and changes == [Change.HIGH_WATERMARK]
    for leader_mark in (1, 0, 5):  # the same mark, an older one, one above the log end
        follower.take_leader_high_watermark(leader_mark)
    assert follower.high_watermark == 2 and changes == [Change.HIGH_WATERMARK] * 2


def test_a_caught_up_poll_of_an_idle_partition_takes_the_cheap_path_only_when_nothing_moved(
    log: PartitionLog,
) -> None:
    partition = _partition(log, (1, 2, 3))
    _append(partition, 5)
    for follower in (2, 3):
        partition.on_follower_fetch(follower, 5, now_ms=1)
    partition.high_watermark_sent(2, 5)
    polled = partition.caught_up_poll(
        2, 5, 0, now_ms=LAG_MS * 5, broker_epoch=-1, log_start_offset=0
    )
    assert polled
    assert partition.follower_states()[2].last_caught_up_ms == LAG_MS * 5  # stays in the ISR
    assert partition.caught_up_poll(3, 5, 0, now_ms=2, broker_epoch=-1, log_start_offset=0) is False
    assert partition.caught_up_poll(2, 5, 7, now_ms=2, broker_epoch=-1, log_start_offset=0) is False
    assert partition.caught_up_poll(2, 5, 0, now_ms=2, broker_epoch=9, log_start_offset=0) is False
    assert partition.caught_up_poll(4, 5, 0, now_ms=2, broker_epoch=-1, log_start_offset=0) is False
    _append(partition, 1)
    assert partition.caught_up_poll(2, 5, 0, now_ms=2, broker_epoch=-1, log_start_offset=0) is False


def test_a_follower_holding_an_idle_log_is_in_sync_as_of_its_last_fetch_from_the_leader(
    log: PartitionLog,
) -> None:
    """A fetch session does not show the leader a follower's polls of an idle partition, so
    its last caught-up time there grows old: the follower is in sync while it holds the whole
    log, and an append finds it caught up as of its last fetch from this leader (it polled the
    partition in its session), also after the session's next fetch reads it the new records;
    one that stopped fetching long ago leaves the ISR at once, as in Kafka."""
    quiet_ms = LAG_MS * 10
    last_fetch_ms = {2: quiet_ms - 5, 3: 1}  # broker 3 stopped fetching after its first one
    partition = Partition(
        _local((1, 2, 3)),
        log,
        broker_id=1,
        min_insync_replicas=2,
        now_ms=0,
        on_change=lambda _: None,
        last_fetch_ms=lambda broker_id: last_fetch_ms.get(broker_id, 0),
    )
    _append(partition, 5)
    for follower in (2, 3):
        partition.on_follower_fetch(follower, 5, now_ms=1)
    assert partition.propose_isr(now_ms=quiet_ms, lag_time_max_ms=LAG_MS, eligible=ELIGIBLE) is None
    batch = build_batch([(0, None, b"v")])
    partition.append_as_leader(batch, acks=-1, now_ms=quiet_ms)
    proposed = partition.propose_isr(now_ms=quiet_ms + 1, lag_time_max_ms=LAG_MS, eligible=ELIGIBLE)
    assert proposed == (1, 2)
    partition.alter_failed(now_ms=quiet_ms + 1)
    partition.on_follower_fetch(2, 5, now_ms=quiet_ms + 2)  # the session's look, behind by one
    proposed = partition.propose_isr(now_ms=quiet_ms + 3, lag_time_max_ms=LAG_MS, eligible=ELIGIBLE)
    assert proposed == (1, 2)
