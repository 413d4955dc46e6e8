"""Brokers leaving their partitions in bounded steps: fencing, and the leadership moves of a
controlled shutdown (issue 18 §3.2; Kafka's handleBrokerFenced over BrokersToIsrs, with its
records split over several batches as Kafka's non-atomic ControllerResult is).

A broker in the ISR of a million partitions needs a million partition changes to leave them.
Deciding, encoding and replaying them in one decision held the controller thread, which also
runs Raft, for seconds: followers deposed the leader, and the next one tried the same fence.
So the work is cut into steps of at most `HeartbeatTracker.partition_changes_max` partitions,
one step per controller turn (the core's tick), each its own entry:

- A fence's partition changes come first and the BrokerRegistrationChangeRecord(fenced=True) of
  a broker comes with the step that leaves its last partition (Kafka's order): the broker is
  reported fenced only once that record commits. Until then its heartbeats change nothing.
- Every step is decided on the pending image, so decisions in between see the steps before.
- What is left is derived from the image (`partitions_to_leave`), never from memory: a new
  active controller that finds a broker half fenced fences it again when its session ends and
  simply carries on; a fenced broker still in an ISR (a replaced incarnation) leaves it before
  it may be unfenced (`cluster.py`).
- The brokers leaving in one step all leave together and none of them may be elected, so a
  step never hands a leadership to a broker that a later step takes it from.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from pykraft.metadata_log.image import MetadataImage
from pykraft.metadata_log.partition_index import BrokerPartitions, PartitionKey
from pykraft.metadata_log.records import BrokerRegistrationChangeRecord, Record
from pykraft.quorum.controller.heartbeats import HeartbeatTracker
from pykraft.quorum.controller.leadership import (
    partitions_to_leave,
    records_to_leave,
)


def leave_step(
    image: MetadataImage, fencing: Collection[int], moving: Collection[int], partitions_max: int
) -> tuple[list[Record], set[int]]:
    """One step for the brokers being fenced and those moving their partitions away (controlled
    shutdown): the changes of up to `partitions_max` partitions, then the fence of each broker
    of `fencing` that this step takes out of its last partition (if it is registered and
    unfenced). Returns the records and the brokers of both groups left with nothing to leave."""
    leaving = sorted({*fencing, *moving})
    keys = partitions_to_leave(image, leaving, partitions_max)
    records: list[Record] = list(records_to_leave(image, keys, leaving))
    chosen = set(keys)
    done = {b for b in leaving if _covers(chosen, image.topics.partitions_in_isr(b))}
    for broker_id in sorted(done.intersection(fencing)):
        registration = image.cluster.broker(broker_id)
        if registration is not None and not registration.fenced:
            records.append(
                BrokerRegistrationChangeRecord(broker_id, registration.broker_epoch, fenced=True)
            )
    return records, done


def _covers(keys: set[PartitionKey], partitions: BrokerPartitions) -> bool:
    return partitions.count() <= len(keys) and keys.issuperset(partitions)


def step_leaving(
    image: MetadataImage, sessions: HeartbeatTracker, next_offset: int
) -> list[Record]:
    """The next step of every broker `sessions` has leaving (see `leave_step`), noting which
    finished; a shutting broker's shutdown offset moves to this step's last record."""
    moving = sessions.moving()
    records, done = leave_step(image, sessions.fencing(), moving, sessions.partition_changes_max)
    if records:
        for broker_id in moving:
            sessions.shutdown_offset(broker_id, next_offset + len(records) - 1)
    sessions.finish_leaving(done)
    return records


def start_fences(
    image: MetadataImage,
    broker_ids: Iterable[int],
    sessions: HeartbeatTracker,
    next_offset: int,
) -> tuple[list[Record], bool]:
    """Starts fencing the registered brokers among `broker_ids` that are unfenced or, fenced, still
    in an ISR (a replaced incarnation); their sessions end. Decides the first step of everything
    leaving (none: the next step alone); returns (records, whether each of them is fenced and
    out of every ISR once these records commit). Unknown brokers and fenced ones in no ISR are
    skipped."""
    fencing = [
        broker_id
        for broker_id in sorted(set(broker_ids))
        if (broker := image.cluster.broker(broker_id)) is not None
        and (not broker.fenced or image.topics.partitions_in_isr(broker_id))
    ]
    sessions.start_fences(fencing)
    records = step_leaving(image, sessions, next_offset) if sessions.leaving_in_progress else []
    return records, not any(sessions.is_leaving(b) for b in fencing)
