"""Replication policies: what a mirrored topic is called on the target, and the names of the
mirror's own topics there (MM2's ReplicationPolicy, DefaultReplicationPolicy and
IdentityReplicationPolicy).

The default policy names a remote topic `<source alias><separator><topic>` ("source.orders"),
so a topic can tell where it came from and a mirror never copies a topic back to the cluster it
came from (a cycle). The identity policy keeps names unchanged, for one-way mirroring (a
migration, a standby cluster); it cannot see cycles, so the topology must have none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

OFFSET_SYNCS_PREFIX: Final = "mm2-offset-syncs"
INTERNAL_SUFFIX: Final = "internal"
CHECKPOINTS_INFIX: Final = "checkpoints"


@dataclass(frozen=True)
class ReplicationPolicy:
    """`identity` False is MM2's DefaultReplicationPolicy, True its IdentityReplicationPolicy;
    internal topic names are the same for both (MM2's, with `separator`)."""

    source_alias: str
    separator: str = "."
    identity: bool = False

    def remote_topic(self, topic: str) -> str:
        """The target topic a source topic is mirrored to."""
        return topic if self.identity else f"{self.source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster a topic was mirrored from; None for a topic written
        where it lives. The identity policy cannot tell, so it names none."""
        if self.identity:
            return None
        alias, separator, rest = topic.partition(self.separator)
        return alias if separator and alias and rest else None

    def is_cycle(self, topic: str, target_alias: str) -> bool:
        """Whether mirroring `topic` would copy it back to `target_alias`, a cluster it
        already passed through (MM2's cycle check, following every hop of the name)."""
        while (source := self.topic_source(topic)) is not None:
            if source == target_alias:
                return True
            topic = topic[len(source) + len(self.separator) :]
        return False

    def offset_syncs_topic(self) -> str:
        """The offset-sync topic on the target (MM2's name with offset-syncs.topic.location=
        target): where each source offset landed, and so the mirror's progress."""
        return f"{OFFSET_SYNCS_PREFIX}{self.separator}{self.source_alias}{self._internal}"

    def checkpoints_topic(self) -> str:
        """The checkpoints topic on the target: the source groups' offsets, translated."""
        return f"{self.source_alias}{self.separator}{CHECKPOINTS_INFIX}{self._internal}"

    @property
    def _internal(self) -> str:
        return f"{self.separator}{INTERNAL_SUFFIX}"
