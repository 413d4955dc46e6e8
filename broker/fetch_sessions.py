"""Fetch sessions (KIP-227), the leader's side: a follower names each partition once, and after
that only when its fetch of it changed, so an idle partition costs neither side anything per
fetch. With many partitions per leader and few of them written, naming and checking every one
in every fetch was most of the replication work (issue 17 §7).

A follower opens a session with a whole fetch (`session_epoch` 0); the answer carries the
session's id. Each later request carries the id and the next epoch (1, 2, ...), the partitions
whose fetch changed (their new fetch offset, epochs, sizes) and the ones forgotten; the
session fetches every other partition as last named. What the leader must look at in a
session's fetch is then the partitions named, and those that changed here since they were
last looked at: the session's watch (`SessionWatch`) keeps which, as every append, mark move
or role change of a partition is noted to the watches (`PartitionWatches.changed`). A partition
looked at but not answered (over the answer's size) is looked at again next time.

A follower's fetch of an idle partition it holds whole is no longer seen by the leader, so the
ISR rule counts a follower at the leader's log end as in sync (`isr.out_of_sync_replicas`, as
Kafka's ReplicaState.isCaughtUp), and an append finds such a follower caught up as of its
session's last fetch (`last_fetch_ms`, `isr.note_caught_up_until_append`).

One session per follower broker: a whole fetch from the same broker replaces its session (a
restarted follower, or one that lost an answer). At most FETCH_SESSIONS_MAX sessions; when
full, sessions unused for FETCH_SESSION_IDLE_MS_MAX are evicted, and if none is, the fetch is
answered whole without a session (its id 0), as Kafka does.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Collection, Iterable, Sequence
from typing import Final

from pykraft.broker.log import LogError
from pykraft.broker.partition_watches import Change, Key, PartitionWatches, Watch
from pykraft.proto import broker_pb2, common_pb2

# Kafka's max.incremental.fetch.session.cache.slots and min.incremental.fetch.session.eviction.ms.
FETCH_SESSIONS_MAX: Final = 1000
FETCH_SESSION_IDLE_MS_MAX: Final = 120_000
SESSION_ID_MAX: Final = (1 << 31) - 1
SESSION_EPOCH_MAX: Final = (1 << 31) - 1

# What a look at a fetch reads: by topic, the partitions' fetches as last named.
Plan = list[tuple[str, Sequence[broker_pb2.FetchPartition]]]


class SessionWatch(Watch):
    """A session's watch, for its lifetime: wakes its parked fetch like any watch, and keeps
    which of its partitions changed since `take`."""

    def __init__(self) -> None:
        super().__init__(Change.ALL)
        self._lock = threading.Lock()
        self._changed: set[Key] = set()
        self._all = False

    def note(self, key: Key | None) -> None:
        with self._lock:
            if key is None:
                self._all = True
            else:
                self._changed.add(key)
        super().note(key)

    def take(self) -> set[Key] | None:
        """The partitions changed since the last `take` (None: any may have)."""
        with self._lock:
            changed, every = self._changed, self._all
            self._changed, self._all = set(), False
        return None if every else changed


class FetchSession:
    """One follower's session: the fetch of each partition as last named, and the partitions
    to look at in every look until an answer goes out."""

    def __init__(
        self, session_id: int, replica_id: int, now_ms: int, watches: PartitionWatches
    ) -> None:
        self.session_id = session_id
        self.replica_id = replica_id
        self.next_epoch = 1
        self.used_ms = now_ms
        self.watch = SessionWatch()
        self._watches = watches
        self._items: dict[Key, broker_pb2.FetchPartition] = {}
        self._pending: set[Key] = set()
        self._closed = False
        # Its partitions and their watching change together, and a request still running in
        # a session that was just replaced must not watch again what `close` stopped watching.
        self._lock = threading.Lock()

    def plan(self, named: Iterable[Key]) -> Plan:
        """What this look reads: the partitions the request `named`, those changed since they
        were last looked at, and those an answer left out for size."""
        with self._lock:
            changed = self.watch.take()
            if changed is None:
                self._pending = set(self._items)
            else:
                self._pending.update(k for k in changed if k in self._items)
            keys = sorted(self._pending.union(named))
            by_topic: dict[str, list[broker_pb2.FetchPartition]] = {}
            for key in keys:
                item = self._items.get(key)
                if item is not None:
                    by_topic.setdefault(key[0], []).append(item)
            return list(by_topic.items())

    def name(self, request: broker_pb2.FetchRequest) -> list[Key]:
        """Notes the fetches `request` names and drops the partitions it forgets, watching the
        session's partitions (and only those) from now on (nothing once closed); returns the
        partitions it names."""
        fetches = [((t.topic, p.partition), p) for t in request.topics for p in t.partitions]
        named = [key for key, _ in fetches]
        added: list[Key] = []
        with self._lock:
            if self._closed:
                return named
            for key, item in fetches:
                if key not in self._items:
                    added.append(key)
                self._items[key] = item
            forgotten = [
                (t.topic, p)
                for t in request.forgotten
                for p in t.partitions
                if self._items.pop((t.topic, p), None) is not None
            ]
            self._watches.add(self.watch, added)
            self._watches.remove(self.watch, forgotten)
        return named

    def close(self) -> None:
        """Stops watching: the session was replaced or evicted."""
        with self._lock:
            self._closed = True
            self._watches.remove(self.watch, self._items)

    def answered(self, left: Collection[Key]) -> None:
        """An answer went out, from the last look: its partitions are done but `left` (left
        out for size)."""
        with self._lock:
            self._pending = set(left)


class FetchSessions:
    """A broker's fetch sessions, by id and by follower."""

    def __init__(
        self,
        watches: PartitionWatches,
        *,
        sessions_max: int = FETCH_SESSIONS_MAX,
        idle_ms_max: int = FETCH_SESSION_IDLE_MS_MAX,
        seed: int | None = None,
    ) -> None:
        self._watches = watches
        self._sessions_max = sessions_max
        self._idle_ms_max = idle_ms_max
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._by_id: dict[int, FetchSession] = {}
        self._by_replica: dict[int, FetchSession] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def last_fetch_ms(self, broker_id: int) -> int:
        """When the follower `broker_id` last fetched in its session (0: it has none): it
        polled every partition of its session then."""
        session = self._by_replica.get(broker_id)
        return 0 if session is None else session.used_ms

    def session_for(
        self, request: broker_pb2.FetchRequest, now_ms: int
    ) -> tuple[FetchSession | None, list[Key]]:
        """The session a follower's `request` runs in (None: answer it whole without one) and
        the partitions it names, its fetches noted; LogError when the request does not fit
        its session (the follower opens a new one)."""
        if request.session_epoch == 0:
            return self._open(request, now_ms)
        with self._lock:
            session = self._by_id.get(request.session_id)
            if session is None or session.replica_id != request.replica_id:
                raise LogError(
                    common_pb2.FETCH_SESSION_ID_NOT_FOUND,
                    f"no fetch session {request.session_id} of broker {request.replica_id}",
                )
            if request.session_epoch != session.next_epoch:
                raise LogError(
                    common_pb2.INVALID_FETCH_SESSION_EPOCH,
                    f"fetch session {request.session_id} expects epoch {session.next_epoch}, "
                    f"not {request.session_epoch}",
                )
            session.next_epoch = session.next_epoch % SESSION_EPOCH_MAX + 1
            session.used_ms = now_ms
        return session, session.name(request)

    def _open(
        self, request: broker_pb2.FetchRequest, now_ms: int
    ) -> tuple[FetchSession | None, list[Key]]:
        """A new session for the follower (replacing its old one) over the partitions it
        names, and those; None when every slot is held by a session used lately (the fetch
        reads what it names without one)."""
        with self._lock:
            old = self._by_replica.get(request.replica_id)
            if old is not None:
                self._drop(old)
            if len(self._by_id) >= self._sessions_max:
                self._evict_idle(now_ms)
            if len(self._by_id) >= self._sessions_max:
                return None, []
            session = FetchSession(self._new_id(), request.replica_id, now_ms, self._watches)
            self._by_id[session.session_id] = self._by_replica[request.replica_id] = session
        return session, session.name(request)

    def _evict_idle(self, now_ms: int) -> None:
        """Holds `_lock`."""
        idle = [s for s in self._by_id.values() if now_ms - s.used_ms > self._idle_ms_max]
        for session in idle:
            self._drop(session)

    def _drop(self, session: FetchSession) -> None:
        """Holds `_lock`."""
        del self._by_id[session.session_id]
        del self._by_replica[session.replica_id]
        session.close()

    def _new_id(self) -> int:
        """Holds `_lock`. Random, so that an id from before a restart is not found."""
        while True:
            session_id = self._random.randint(1, SESSION_ID_MAX)
            if session_id not in self._by_id:
                return session_id
