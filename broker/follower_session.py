"""Fetch sessions (KIP-227), the follower's side (Kafka's FetchSessionHandler): one per fetcher
thread, so per leader. The first request names every partition and opens a session; each later
one names only the partitions whose fetch changed since the request before (after an append,
a truncation, a new leader epoch, a throttle's new size) and forgets those no longer fetched
(parked, moved away). The leader's side is `fetch_sessions`.

Any failure (an error answer, a lost answer, a transport error) drops the session: the next
request is whole again and opens a new one. The leader cannot tell a lost answer from a slow
one, so nothing is assumed of a request whose answer did not arrive.
"""

from __future__ import annotations

from typing import NamedTuple

from pykraft.broker.fetch_sessions import SESSION_EPOCH_MAX
from pykraft.broker.partition_watches import Key
from pykraft.proto import broker_pb2, common_pb2


class FetchState(NamedTuple):
    """What a follower's request says of one partition."""

    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


class FollowerSession:
    """The session with one leader: its id and next epoch (0: open one), and the fetch of each
    partition as the leader holds it."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = 0
        self._held: dict[Key, FetchState] = {}  # as the leader's session holds them
        self._sent: dict[Key, FetchState] = {}  # as the request in flight leaves them

    def fill(self, request: broker_pb2.FetchRequest, wanted: dict[Key, FetchState]) -> None:
        """Puts into `request` (without partitions yet) the session and the partitions to
        fetch: every one in `wanted` when opening a session, else the changed and the
        forgotten ones."""
        request.session_id, request.session_epoch = self.session_id, self.epoch
        opening = self.epoch == 0
        topics: dict[str, broker_pb2.FetchTopic] = {}
        for key, state in wanted.items():
            if not opening and self._held.get(key) == state:
                continue
            topic = topics.get(key[0])
            if topic is None:
                topic = topics[key[0]] = request.topics.add(topic=key[0])
            topic.partitions.add(
                partition=key[1],
                current_leader_epoch=state.current_leader_epoch,
                fetch_offset=state.fetch_offset,
                last_fetched_epoch=state.last_fetched_epoch,
                log_start_offset=state.log_start_offset,
                partition_max_bytes=state.partition_max_bytes,
            )
        if not opening:
            forgotten: dict[str, broker_pb2.FetchTopicPartitions] = {}
            for key in self._held.keys() - wanted.keys():
                entry = forgotten.get(key[0])
                if entry is None:
                    entry = forgotten[key[0]] = request.forgotten.add(topic=key[0])
                entry.partitions.append(key[1])
        self._sent = wanted

    def answered(self, response: broker_pb2.FetchResponse) -> bool:
        """Takes the answer to the request last filled: whether it is one to apply (False: the
        leader refused the session, and the next request opens a new one)."""
        if response.header.error_code != common_pb2.NONE:  # the session is gone
            self.drop()
            return False
        if response.session_id == 0:  # the leader keeps none for us: the answer is whole
            self.drop()
            return True
        if self.epoch != 0 and response.session_id != self.session_id:
            self.drop()  # not our session's answer: trust nothing of it
            return False
        self.session_id, self._held = response.session_id, self._sent
        self.epoch = self.epoch % SESSION_EPOCH_MAX + 1
        return True

    def drop(self) -> None:
        """Forgets the session (an answer was lost or refused): the next request opens one."""
        self.session_id, self.epoch = 0, 0
        self._held, self._sent = {}, {}
