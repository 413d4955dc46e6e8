"""Broker sessions: soft state of the active controller only (Kafka's BrokerHeartbeatManager).

Nothing here is in the log. A controller that becomes active calls `reset`, giving every
registered broker a fresh session, because it cannot know when brokers last reached the previous
active controller; a broker that is really gone then expires one timeout later.

A broker is alive while its last contact is at most `session_timeout_ms` old. Time is passed in
(`now_ms`, monotonic); contacts never move back in time.
"""

from __future__ import annotations

from pykraft.metadata_log.image import MetadataImage


class HeartbeatTracker:
    """Last contact time per broker. Holds at most one entry per broker that has been touched or
    reset and not removed; callers remove brokers they fence for expiry."""

    def __init__(self, session_timeout_ms: int) -> None:
        assert session_timeout_ms > 0
        self.session_timeout_ms = session_timeout_ms
        self._last_contact_ms: dict[int, int] = {}

    def touch(self, broker_id: int, now_ms: int) -> None:
        """The broker was heard from (registration or heartbeat) at `now_ms`."""
        previous = self._last_contact_ms.get(broker_id)
        self._last_contact_ms[broker_id] = now_ms if previous is None else max(previous, now_ms)

    def is_alive(self, broker_id: int, now_ms: int) -> bool:
        last_ms = self._last_contact_ms.get(broker_id)
        return last_ms is not None and now_ms - last_ms <= self.session_timeout_ms

    def expired(self, image: MetadataImage, now_ms: int) -> list[int]:
        """Sorted ids of the unfenced brokers (controlled shutdown included) of `image` whose
        session is not alive, including any never heard from since the last `reset`."""
        return sorted(
            broker_id
            for broker_id, broker in image.cluster.brokers.items()
            if not broker.fenced and not self.is_alive(broker_id, now_ms)
        )

    def reset(self, image: MetadataImage, now_ms: int) -> None:
        """Forgets all sessions and starts a fresh one for every broker registered in `image`."""
        self._last_contact_ms = dict.fromkeys(image.cluster.brokers, now_ms)

    def remove(self, broker_id: int) -> None:
        self._last_contact_ms.pop(broker_id, None)
