"""The target's topics: the mirror's own (offset syncs, checkpoints), and a remote topic for
each mirrored source topic, created with the source's partition count and topic configs, grown
when the source gains partitions, and kept in sync with the source's configs (MM2's
MirrorSourceConnector: refresh.topics.*, sync.topic.configs.*).

A source topic is mirrored when `topics`/`topics.exclude` pass it, it is not internal (MM2's
rule: `__*`, `.*`, `*.internal`, `*-internal`) and mirroring it would not copy it back to the
cluster it came from (the policy's cycle check). Configs are copied where the source sets them
on the topic (not defaults), except `config.properties.exclude`; a config removed on the source
stays as it is on the target, as MM2 leaves it. The planning is pure (`plan_topics`,
`config_changes`); `TopicSync` asks the clusters and applies it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from pykraft.client import (
    AdminClient,
    ConfigSource,
    ConfigValue,
    NewTopic,
    TopicAlreadyExistsError,
    TopicDescription,
    TopicPartition,
)
from pykraft.mirror.config import MirrorConfig, NameFilter
from pykraft.mirror.policy import ReplicationPolicy

log = logging.getLogger(__name__)

# The mirror's own topics: one partition each (syncs and checkpoints stay in write order),
# compacted (only each key's latest matters once read), as MM2 creates them.
INTERNAL_TOPIC_CONFIGS: Final = {"cleanup.policy": "compact"}
_INTERNAL_PREFIXES: Final = ("__", ".")
_INTERNAL_SUFFIXES: Final = (".internal", "-internal")


def is_internal(topic: str) -> bool:
    """MM2's ReplicationPolicy.isInternalTopic: never mirrored, whatever `topics` says."""
    return topic.startswith(_INTERNAL_PREFIXES) or topic.endswith(_INTERNAL_SUFFIXES)


@dataclass(frozen=True)
class TopicPlan:
    """What the target needs: topics to create, topics to grow (name -> partition count), and
    the source partitions ready to copy now (their target partition exists) -> target."""

    create: list[NewTopic]
    grow: dict[str, int]
    ready: dict[TopicPartition, TopicPartition]


def mirrored_topics(
    source: Iterable[TopicDescription], config: MirrorConfig, policy: ReplicationPolicy
) -> list[TopicDescription]:
    """The source topics the mirror copies, by name."""
    topics = config.topic_filter()
    return sorted(
        (
            t
            for t in source
            if topics.matches(t.name)
            and not is_internal(t.name)
            and not policy.is_cycle(t.name, config.target_cluster_alias)
        ),
        key=lambda t: t.name,
    )


def plan_topics(
    mirrored: Iterable[TopicDescription],
    target: Mapping[str, TopicDescription],
    config: MirrorConfig,
    policy: ReplicationPolicy,
) -> TopicPlan:
    """Creates what is missing and grows what is short; a partition is ready once its target
    partition exists (a topic being created is ready at the next refresh)."""
    configs = config.config_filter()
    create: list[NewTopic] = []
    grow: dict[str, int] = {}
    ready: dict[TopicPartition, TopicPartition] = {}
    for topic in mirrored:
        remote = policy.remote_topic(topic.name)
        count = len(topic.partitions)
        existing = target.get(remote)
        if existing is None:
            topic_configs = copied_configs(topic.configs, configs)
            create.append(NewTopic(remote, count, config.replication_factor, topic_configs))
            continue
        if len(existing.partitions) < count:
            grow[remote] = count
        for partition in range(min(count, len(existing.partitions))):
            ready[TopicPartition(topic.name, partition)] = TopicPartition(remote, partition)
    return TopicPlan(create, grow, ready)


def copied_configs(configs: Mapping[str, ConfigValue], wanted: NameFilter) -> dict[str, str]:
    """The configs set on a source topic that the mirror copies."""
    return {
        name: value.value
        for name, value in configs.items()
        if value.source is ConfigSource.DYNAMIC_TOPIC_CONFIG and wanted.matches(name)
    }


def config_changes(
    source: Mapping[str, ConfigValue], target: Mapping[str, ConfigValue], wanted: NameFilter
) -> dict[str, str]:
    """The configs to set on a remote topic so it has its source topic's."""
    return {
        name: value
        for name, value in copied_configs(source, wanted).items()
        if name not in target or target[name].value != value
    }


class TopicSync:
    """Applies the plans to the target (an AdminClient per cluster)."""

    def __init__(
        self,
        source: AdminClient,
        target: AdminClient,
        config: MirrorConfig,
        policy: ReplicationPolicy,
    ) -> None:
        self._source = source
        self._target = target
        self._config = config
        self._policy = policy

    def create_internal_topics(self) -> None:
        """The offset-sync and checkpoints topics, unless they exist."""
        config = self._config
        topics = [
            NewTopic(
                self._policy.offset_syncs_topic(),
                1,
                config.offset_syncs_topic_replication_factor,
                INTERNAL_TOPIC_CONFIGS,
            ),
            NewTopic(
                self._policy.checkpoints_topic(),
                1,
                config.checkpoints_topic_replication_factor,
                INTERNAL_TOPIC_CONFIGS,
            ),
        ]
        self._create(topics)

    def refresh(self) -> dict[TopicPartition, TopicPartition]:
        """Creates and grows remote topics; the source partitions ready to copy -> target."""
        mirrored = self.mirrored()
        target = {t.name: t for t in self._target.describe_topics()}
        plan = plan_topics(mirrored, target, self._config, self._policy)
        self._create(plan.create)
        if plan.grow:
            log.info("adding partitions on the target: %s", plan.grow)
            self._target.create_partitions(plan.grow)
        return plan.ready

    def mirrored(self) -> list[TopicDescription]:
        """The source topics mirrored now, with their configs."""
        source = self._source.describe_topics(include_configs=True)
        return mirrored_topics(source, self._config, self._policy)

    def sync_configs(self) -> None:
        """Sets on each existing remote topic the configs its source topic sets."""
        wanted = self._config.config_filter()
        mirrored = {self._policy.remote_topic(t.name): t for t in self.mirrored()}
        existing = {t.name for t in self._target.describe_topics()}
        names = sorted(set(mirrored) & existing)
        if not names:
            return
        for remote in self._target.describe_topics(names, include_configs=True):
            changes = config_changes(mirrored[remote.name].configs, remote.configs, wanted)
            if changes:
                log.info("setting %s on %s", changes, remote.name)
                self._target.alter_configs("topic", remote.name, set=changes)

    def _create(self, topics: list[NewTopic]) -> None:
        for topic in topics:
            try:
                self._target.create_topics([topic])
            except TopicAlreadyExistsError:
                continue  # created meanwhile (another mirror, an earlier attempt)
            log.info("created %s (%d partitions) on the target", topic.name, topic.num_partitions)
