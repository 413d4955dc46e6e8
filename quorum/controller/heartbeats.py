"""Broker sessions: soft state of the active controller only (Kafka's BrokerHeartbeatManager).

Nothing here is in the log. A controller that becomes active calls `reset`, giving every
registered broker a fresh session, because it cannot know when brokers last reached the previous
active controller; a broker that is really gone then expires one timeout later.

A broker is alive while its last contact is at most `session_timeout_ms` old. Time is passed in
(`now_ms`, monotonic); contacts never move back in time.

Session streams: a broker holds a `BrokerSession` stream open to the active controller, each
stream with an id the controller draws (increasing). Only the newest stream opened per broker is
current, so the end of an older one, seen after a newer one opened, is ignored; `reset` forgets
every stream, so a stream opened before this controller became active never fences anything.

Controlled shutdown (Kafka's controlledShutdownOffset): the offset of the last record that moved
a shutting broker's leaderships away is noted, and the broker is let go only once every live,
unfenced broker (itself included) has reported metadata up to it, so no broker still believes the
leaving one leads when it stops.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from pykraft.metadata_log.image import MetadataImage

# How many partitions one step of brokers leaving their partitions changes (`leaving.py`): a
# partition change costs the active controller about 12 us to decide, encode and replay, so a
# step holds its thread about 50 ms between two Raft polls (quorum_controller.py), far within an
# election timeout. Each step also costs about 15 ms whatever its size (an entry's commit round
# trips and the followers' turns): at 1,000 that was a third of a fence's time.
PARTITION_CHANGES_PER_STEP_MAX: Final = 4000


class HeartbeatTracker:
    """Last contact time and current session stream per broker, and the brokers leaving their
    partitions step by step (`leaving.py`: being fenced, or moving their partitions away in a
    controlled shutdown). Holds at most one entry per broker that has been touched or reset and
    not removed; callers remove brokers they fence."""

    def __init__(
        self,
        session_timeout_ms: int,
        partition_changes_max: int = PARTITION_CHANGES_PER_STEP_MAX,
    ) -> None:
        assert session_timeout_ms > 0 and partition_changes_max > 0
        self.session_timeout_ms = session_timeout_ms
        self.partition_changes_max = partition_changes_max
        self._fencing: set[int] = set()
        self._moving: set[int] = set()
        self._last_contact_ms: dict[int, int] = {}
        # The highest metadata offset each broker reported having replayed.
        self._metadata_offsets: dict[int, int] = {}
        # Per broker in controlled shutdown: the offset every live broker must reach first.
        self._shutdown_offsets: dict[int, int] = {}
        # Per broker, the id of its current session stream (the newest opened).
        self._streams: dict[int, int] = {}

    def start_fences(self, broker_ids: Iterable[int]) -> None:
        """The brokers are being fenced: their sessions end, and any move of theirs becomes
        part of the fence."""
        for broker_id in broker_ids:
            self.remove(broker_id)
            self._moving.discard(broker_id)
            self._fencing.add(broker_id)

    def start_moving(self, broker_id: int) -> None:
        """The broker, in controlled shutdown, moves its partitions away (unless being fenced)."""
        if broker_id not in self._fencing:
            self._moving.add(broker_id)

    def fencing(self) -> list[int]:
        return sorted(self._fencing)

    def moving(self) -> list[int]:
        return sorted(self._moving)

    def is_leaving(self, broker_id: int) -> bool:
        return broker_id in self._fencing or broker_id in self._moving

    @property
    def leaving_in_progress(self) -> bool:
        return bool(self._fencing or self._moving)

    def finish_leaving(self, broker_ids: Iterable[int]) -> None:
        """The brokers left their last partition (and those being fenced are, once it commits)."""
        for broker_id in broker_ids:
            self._fencing.discard(broker_id)
            self._moving.discard(broker_id)

    def open_stream(self, broker_id: int, stream_id: int) -> None:
        """`broker_id` opened session stream `stream_id`; it is current unless a newer one is."""
        self._streams[broker_id] = max(self._streams.get(broker_id, -1), stream_id)

    def end_stream(self, broker_id: int, stream_id: int) -> bool:
        """Session stream `stream_id` of `broker_id` ended: True when it was the current one
        (then forgotten), False when a newer one opened since or it is not known here."""
        if self._streams.get(broker_id) != stream_id:
            return False
        del self._streams[broker_id]
        return True

    def touch(self, broker_id: int, now_ms: int, metadata_offset: int = -1) -> None:
        """The broker was heard from (registration or heartbeat) at `now_ms`, having replayed
        the metadata log up to `metadata_offset` (-1: not said)."""
        previous = self._last_contact_ms.get(broker_id)
        self._last_contact_ms[broker_id] = now_ms if previous is None else max(previous, now_ms)
        offset = self._metadata_offsets.get(broker_id, -1)
        self._metadata_offsets[broker_id] = max(offset, metadata_offset)

    def shutdown_offset(self, broker_id: int, offset: int) -> None:
        """Records written up to `offset` moved the shutting `broker_id`'s leaderships."""
        self._shutdown_offsets[broker_id] = max(self._shutdown_offsets.get(broker_id, -1), offset)

    def shutdown_replicated(self, image: MetadataImage, broker_id: int, now_ms: int) -> bool:
        """Whether every live, unfenced broker of `image` has reported metadata up to the
        shutdown offset of `broker_id` (True when none was noted)."""
        needed = self._shutdown_offsets.get(broker_id, -1)
        return all(
            self._metadata_offsets.get(other, -1) >= needed
            for other, registration in image.cluster.brokers.items()
            if not registration.fenced and self.is_alive(other, now_ms)
        )

    def metadata_offsets(self) -> dict[int, int]:
        """A copy of the highest metadata offset each broker reported: dict() of a dict with int
        keys copies in one step under the GIL, so another thread may take it."""
        return dict(self._metadata_offsets)

    def is_alive(self, broker_id: int, now_ms: int) -> bool:
        last_ms = self._last_contact_ms.get(broker_id)
        return last_ms is not None and now_ms - last_ms <= self.session_timeout_ms

    def expired(self, image: MetadataImage, now_ms: int) -> list[int]:
        """Sorted ids of the unfenced brokers (controlled shutdown included) of `image` whose
        session is not alive, including any never heard from since the last `reset`, and not
        being fenced already."""
        return sorted(
            broker_id
            for broker_id, broker in image.cluster.brokers.items()
            if not broker.fenced
            and not self.is_alive(broker_id, now_ms)
            and broker_id not in self._fencing
        )

    def reset(self, image: MetadataImage, now_ms: int) -> None:
        """Forgets all sessions and starts a fresh one for every broker registered in `image`.
        A broker already in controlled shutdown waits for the whole of `image` to reach every
        live broker, since the offset its leaderships moved at is not known here."""
        self._last_contact_ms = dict.fromkeys(image.cluster.brokers, now_ms)
        self._metadata_offsets = {}
        self._streams = {}
        self._fencing, self._moving = set(), set()  # a new controller starts over from the image
        self._shutdown_offsets = {
            broker_id: image.offset
            for broker_id, registration in image.cluster.brokers.items()
            if registration.in_controlled_shutdown
        }

    def remove(self, broker_id: int) -> None:
        self._last_contact_ms.pop(broker_id, None)
        self._metadata_offsets.pop(broker_id, None)
        self._shutdown_offsets.pop(broker_id, None)
        self._streams.pop(broker_id, None)

    def next_expiry_ms(self, now_ms: int) -> int | None:
        """The earliest time after `now_ms` at which a session heard from now expires (None:
        none will), so a driver knows when to look for brokers to fence."""
        expiries = (
            last_ms + self.session_timeout_ms + 1 for last_ms in self._last_contact_ms.values()
        )
        return min((ms for ms in expiries if ms > now_ms), default=None)
