"""Which partitions a metadata change asks this broker to lead, follow or delete (Kafka's
TopicsDelta.localChanges). Pure: images in, a plan out.

Only partitions whose registration changed for this broker are listed, so the replica manager
acts on exactly those. A partition listed to lead or follow whose log the broker lacks is
created. Deletions come first in the plan's use: a topic removed and created again under the same
name in one change reuses the directory name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Final
from uuid import UUID

from pykraft.metadata_log import MetadataDelta, MetadataImage, PartitionRegistration, TopicImage

# Partitions a summary names for each kind of change; the rest are only counted, so a change that
# touches thousands of partitions logs one short line (each one is at DEBUG).
SUMMARY_NAMES_MAX: Final = 3


@dataclasses.dataclass(frozen=True, slots=True)
class LocalPartition:
    """A partition this broker holds a replica of, with its registration in the new image."""

    topic: str
    topic_id: UUID
    partition: int
    registration: PartitionRegistration

    @property
    def directory_name(self) -> str:
        """Kafka's directory name for the partition's log: `<topic>-<partition>`."""
        return f"{self.topic}-{self.partition}"


@dataclasses.dataclass(frozen=True, slots=True)
class LocalChanges:
    """What this broker must do: lead or follow (creating the log if missing), or delete."""

    leaders: tuple[LocalPartition, ...]
    followers: tuple[LocalPartition, ...]
    deletes: tuple[tuple[str, int], ...]

    @property
    def empty(self) -> bool:
        return not (self.leaders or self.followers or self.deletes)

    def summary(self) -> str:
        """One line for the log: how many partitions to lead, follow and delete, naming the
        first SUMMARY_NAMES_MAX of each."""
        kinds = (
            ("lead", [p.directory_name for p in self.leaders]),
            ("follow", [p.directory_name for p in self.followers]),
            ("delete", [f"{topic}-{partition}" for topic, partition in self.deletes]),
        )
        return "; ".join(counted(verb, names) for verb, names in kinds if names)


def counted(verb: str, names: list[str]) -> str:
    """`verb`, how many `names`, and the first SUMMARY_NAMES_MAX of them: a summary log line
    instead of one line per partition."""
    shown = ", ".join(names[:SUMMARY_NAMES_MAX])
    more = len(names) - SUMMARY_NAMES_MAX
    return f"{verb} {len(names)} ({shown}{f' and {more} more' if more > 0 else ''})"


def _hosted(topic: TopicImage | None, broker_id: int) -> dict[int, PartitionRegistration]:
    if topic is None:
        return {}
    return {p: reg for p, reg in topic.partitions.items() if broker_id in reg.replicas}


def local_changes(
    previous: MetadataImage,
    image: MetadataImage,
    broker_id: int,
    delta: MetadataDelta | None,
) -> LocalChanges:
    """The local changes from `previous` to `image`. With `delta` (whose starting image is
    `previous`) only the topics it touched are compared; without one (after a snapshot, or at
    start) every topic of both images is."""
    topic_ids: Iterable[UUID]
    if delta is None:
        topic_ids = set(previous.topics.by_id) | set(image.topics.by_id)
    else:
        assert delta.image is previous, "the delta must start from the previous image"
        topic_ids = delta.changed_topic_ids() | delta.removed_topic_ids()
    leaders: list[LocalPartition] = []
    followers: list[LocalPartition] = []
    deletes: list[tuple[str, int]] = []
    for topic_id in sorted(topic_ids):
        old_topic, new_topic = previous.topics.get(topic_id), image.topics.get(topic_id)
        old, new = _hosted(old_topic, broker_id), _hosted(new_topic, broker_id)
        if old_topic is not None:
            deletes += ((old_topic.name, p) for p in sorted(old) if p not in new)
        if new_topic is None:
            continue
        for partition, registration in sorted(new.items()):
            if old.get(partition) == registration:
                continue
            local = LocalPartition(new_topic.name, topic_id, partition, registration)
            (leaders if registration.leader == broker_id else followers).append(local)
    return LocalChanges(tuple(leaders), tuple(followers), tuple(deletes))
