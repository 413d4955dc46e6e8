"""The consumer's background fetching against in-process fake brokers over real gRPC: the bounded
buffer, lazy decoding, what seek/pause/iteration/close do to prefetched data, and long polls.
Leader moves and fetch errors are in test_consumer_prefetch_errors.py."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import pytest

from pykraft.client import Consumer, ConsumerRecord, TopicPartition
from pykraft.client.consumer import fetch_buffer
from pykraft.client.consumer.fetch_buffer import CompletedFetch
from pykraft.client.consumer.fetcher import Fetcher
from pykraft.client.consumer.subscription import PartitionState, SubscriptionState
from pykraft.proto.record_batch import Buffer, Record, decode_batch
from tests.unit.client.consumer_polling import T0, T1, WAIT_MS, offsets, poll_until, values
from tests.unit.client.fake_broker import WAIT_S, FakeCluster, running
from tests.waiting import wait_until


def state_of(consumer: Consumer, tp: TopicPartition) -> PartitionState:
    return consumer._subscription.partitions[tp]


def buffered_bytes(consumer: Consumer) -> int:
    return consumer._subscription.buffered_bytes


def stored_bytes(cluster: FakeCluster, tp: TopicPartition) -> int:
    with cluster.lock:
        return sum(len(batch) for batch in cluster.logs[tp])


@pytest.fixture
def buffer_peak(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The most bytes the prefetch buffer ever held, watched at every append."""
    peak = [0]
    append = SubscriptionState.append

    def watched(self: SubscriptionState, state: PartitionState, fetch: CompletedFetch) -> None:
        append(self, state, fetch)
        peak[0] = max(peak[0], self.buffered_bytes)

    monkeypatch.setattr(SubscriptionState, "append", watched)
    yield peak


def test_prefetch_runs_ahead_but_never_beyond_the_buffer_limit(buffer_peak: list[int]) -> None:
    with running({"t": 2}) as cluster:
        for i in range(30):
            cluster.append(T0, [b"a%02d-%d" % (i, j) + b"." * 100 for j in range(5)])
            cluster.append(T1, [b"b%02d-%d" % (i, j) + b"." * 100 for j in range(5)])
        batch_bytes = len(cluster.logs[T0][0])
        limit = 5 * batch_bytes + batch_bytes // 2
        with Consumer(
            bootstrap_servers=cluster.bootstrap,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=2 * batch_bytes,
            fetch_buffer_bytes_max=limit,
        ) as consumer:
            consumer.assign([T0, T1])
            # Without any poll the fetcher fills the buffer until no batch fits any more.
            wait_until(lambda: buffered_bytes(consumer) > limit - batch_bytes, "a full buffer")
            assert buffered_bytes(consumer) <= limit
            records = poll_until(consumer, 300, records_max=7)
        by_tp = {tp: [r for r in records if r.partition == tp.partition] for tp in (T0, T1)}
        assert offsets(by_tp[T0]) == list(range(150)) == offsets(by_tp[T1])
        assert values(by_tp[T0])[149] == b"a29-4" + b"." * 100
        assert 0 < buffer_peak[0] <= limit
        assert stored_bytes(cluster, T0) + stored_bytes(cluster, T1) > 10 * limit
        assert cluster.fetches_in_flight_max[1] == 1  # one Fetch at a time per broker


def test_an_answer_larger_than_the_free_room_waits_for_room_and_loses_nothing(
    buffer_peak: list[int],
) -> None:
    with running({"t": 2}) as cluster:
        for i in range(8):
            cluster.append(T0, [b"a%d" % i + b"." * 400])
            cluster.append(T1, [b"b%d" % i + b"." * 50])
        big = len(cluster.logs[T0][0])
        limit = big + big // 2  # room for one big batch, never two
        with Consumer(
            bootstrap_servers=cluster.bootstrap,
            auto_offset_reset="earliest",
            fetch_buffer_bytes_max=limit,
        ) as consumer:
            consumer.assign([T0, T1])
            records = poll_until(consumer, 16, records_max=1)
        assert [r.value[:2] for r in records if r.partition == 0 and r.value] == [
            b"a%d" % i for i in range(8)
        ]
        assert offsets([r for r in records if r.partition == 1]) == list(range(8))
        assert 0 < buffer_peak[0] <= limit


def test_a_batch_larger_than_the_whole_buffer_still_comes_through() -> None:
    with running({"t": 1}) as cluster:
        cluster.append(T0, [b"x" * 5000])
        cluster.append(T0, [b"y"])
        with Consumer(
            bootstrap_servers=cluster.bootstrap,
            auto_offset_reset="earliest",
            fetch_buffer_bytes_max=1000,
        ) as consumer:
            consumer.assign([T0])
            assert values(poll_until(consumer, 2)) == [b"x" * 5000, b"y"]


def test_batches_are_decoded_only_when_poll_reaches_them(monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[int] = []

    def counted(buf: Buffer, position: int = 0, *, verify: bool = True) -> list[Record]:
        decoded.append(position)
        return decode_batch(buf, position, verify=verify)

    monkeypatch.setattr(fetch_buffer, "decode_batch", counted)
    with running({"t": 1}) as cluster:
        for i in range(10):
            cluster.append(T0, [b"%d-%d" % (i, j) for j in range(4)])
        total_bytes = stored_bytes(cluster, T0)
        with Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest") as c:
            c.assign([T0])
            wait_until(lambda: buffered_bytes(c) == total_bytes, "the whole log prefetched")
            assert decoded == []
            assert offsets(c.poll(records_max=3)) == [0, 1, 2]
            assert len(decoded) == 1
            assert offsets(c.poll(records_max=2)) == [3, 4]
            assert len(decoded) == 2
            assert offsets(c.poll(records_max=100)) == list(range(5, 40))
            assert len(decoded) == 10
            assert buffered_bytes(c) == 0


def test_seek_drops_prefetched_records_and_answers_still_in_flight() -> None:
    with running({"t": 1}) as cluster:
        cluster.append(T0, [b"%d" % i for i in range(10)])
        with Consumer(bootstrap_servers=cluster.bootstrap, fetch_max_wait_ms=3000) as c:
            c.assign([T0])
            c.seek(T0, 0)
            assert offsets(c.poll(timeout_ms=WAIT_MS, records_max=2)) == [0, 1]
            assert buffered_bytes(c) > 0
            # Sought while a long poll at offset 10 waits on the broker: its answer (offset
            # 10, fetched for the old position) must not come out before 6..9.
            wait_until(lambda: cluster.fetches_in_flight[1] == 1, "a long poll")
            c.seek(T0, 6)
            assert buffered_bytes(c) == 0
            cluster.append(T0, [b"10"])
            assert offsets(poll_until(c, 5)) == [6, 7, 8, 9, 10]
            # Sought back, to records handed out before.
            wait_until(lambda: cluster.fetches_in_flight[1] == 1, "a long poll")
            c.seek(T0, 3)
            cluster.append(T0, [b"11"])
            assert offsets(poll_until(c, 9)) == list(range(3, 12))
            assert c.poll() == []


def test_paused_partitions_keep_their_buffer_hand_out_nothing_and_are_not_fetched() -> None:
    with running({"t": 2}) as cluster:
        cluster.append(T0, [b"a0", b"a1", b"a2"])
        cluster.append(T1, [b"b0"])
        with Consumer(
            bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=200
        ) as c:
            c.assign([T0, T1])
            wait_until(lambda: state_of(c, T0).fetches, "T0 prefetched")
            c.pause([T0])
            paused_at = len(cluster.fetch_log)
            assert c.paused() == {T0}
            assert values(poll_until(c, 1)) == [b"b0"]
            cluster.append(T0, [b"a3"])
            cluster.append(T1, [b"b1"])
            assert values(poll_until(c, 1)) == [b"b1"]
            cluster.append(T1, [b"b2"])
            assert values(poll_until(c, 1)) == [b"b2"]
            assert state_of(c, T0).fetches, "the paused partition's data is kept"
            assert c.position(T0) == 0
            # Only a Fetch planned before the pause may still have carried T0.
            assert sum(1 for _, tp, _, _ in cluster.fetch_log[paused_at:] if tp == T0) <= 1
            c.resume([T0])
            assert c.paused() == set()
            assert values(poll_until(c, 4)) == [b"a0", b"a1", b"a2", b"a3"]
            with pytest.raises(ValueError, match="not assigned"):
                c.pause([TopicPartition("t", 7)])


def test_iteration_yields_each_record_once_and_ends_when_closed_from_another_thread() -> None:
    with running({"t": 2}) as cluster:
        cluster.append(T0, [b"a0", b"a1", b"a2"])
        cluster.append(T1, [b"b0", b"b1"])
        consumer = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
        consumer.assign([T0, T1])
        seen: list[ConsumerRecord] = []
        ended = threading.Event()

        def iterate() -> None:
            for record in consumer:
                seen.append(record)
            ended.set()

        thread = threading.Thread(target=iterate)
        thread.start()
        try:
            wait_until(lambda: len(seen) == 5, "5 records")
            cluster.append(T1, [b"b2"])
            wait_until(lambda: len(seen) == 6, "the record appended while iterating")
        finally:
            started = time.monotonic()
            consumer.close()
            thread.join(WAIT_S)
        assert ended.is_set(), "the iteration ended by itself, without an error"
        assert time.monotonic() - started < 1.0
        assert values([r for r in seen if r.partition == 0]) == [b"a0", b"a1", b"a2"]
        assert values([r for r in seen if r.partition == 1]) == [b"b0", b"b1", b"b2"]


def test_leaving_an_iteration_early_loses_no_record_and_close_in_the_body_ends_it() -> None:
    with running({"t": 1}) as cluster:
        cluster.append(T0, [b"%d" % i for i in range(5)])
        consumer = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
        consumer.assign([T0])
        taken: list[ConsumerRecord] = []
        for record in consumer:
            taken.append(record)
            if len(taken) == 2:
                break
        assert offsets(taken) == [0, 1]
        assert consumer.position(T0) == 2
        assert offsets(poll_until(consumer, 1, records_max=1)) == [2]
        rest = []
        for record in consumer:
            rest.append(record)
            consumer.close()
        assert offsets(rest) == [3]


def test_close_during_a_long_poll_returns_promptly() -> None:
    with running({"t": 1}) as cluster:
        consumer = Consumer(bootstrap_servers=cluster.bootstrap, fetch_max_wait_ms=30000)
        consumer.assign([T0])
        assert consumer.position(T0) == 0
        answers: list[list[ConsumerRecord]] = []
        thread = threading.Thread(target=lambda: answers.append(consumer.poll(timeout_ms=30000)))
        thread.start()
        wait_until(lambda: cluster.fetches_in_flight[1] == 1, "a long poll on the broker")
        started = time.monotonic()
        consumer.close()
        closed_s = time.monotonic() - started
        thread.join(WAIT_S)
        assert answers == [[]]
        # Not the 30 s that the poll and the broker's long poll would each take.
        assert closed_s < 2.0
        assert time.monotonic() - started < 2.0
        assert consumer._fetcher.join(0), "the fetcher thread has stopped"
        with pytest.raises(RuntimeError, match="closed"):
            consumer.poll()


def test_poll_with_timeout_zero_never_waits() -> None:
    with running({"t": 1}) as cluster:
        cluster.append(T0, [b"a0"])
        with Consumer(
            bootstrap_servers=cluster.bootstrap,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=5000,
        ) as c:
            c.assign([T0])
            assert values(poll_until(c, 1)) == [b"a0"]
            wait_until(lambda: cluster.fetches_in_flight[1] == 1, "a long poll on the broker")
            started = time.monotonic()
            assert c.poll(timeout_ms=0) == []
            assert time.monotonic() - started < 1.0


def test_paused_data_gives_way_when_the_partitions_being_read_need_the_room() -> None:
    with running({"t": 2}) as cluster:
        for i in range(4):
            cluster.append(T0, [b"a%d" % i + b"." * 1000])
        big = len(cluster.logs[T0][0])
        with Consumer(
            bootstrap_servers=cluster.bootstrap,
            auto_offset_reset="earliest",
            fetch_buffer_bytes_max=2 * big + 10,  # two of T0's batches, then no room at all
            retry_backoff_ms=10,
        ) as c:
            c.assign([T0, T1])
            wait_until(lambda: buffered_bytes(c) == 2 * big, "T0 filling the buffer")
            c.pause([T0])
            cluster.append(T1, [b"b0"])
            assert values(poll_until(c, 1)) == [b"b0"]
            c.resume([T0])
            records = poll_until(c, 4)
        assert [r.value[:2] for r in records if r.value] == [b"a0", b"a1", b"a2", b"a3"]
        assert offsets(records) == [0, 1, 2, 3]


def test_a_long_poll_on_one_broker_does_not_hold_up_the_others() -> None:
    with running({"t": 2}, brokers=2) as cluster:
        cluster.move_leader(T1, 2)
        with Consumer(
            bootstrap_servers=cluster.bootstrap,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=3000,
        ) as c:
            c.assign([T0, T1])
            wait_until(
                lambda: cluster.fetches_in_flight[1] == 1 == cluster.fetches_in_flight[2],
                "a long poll on each broker",
            )
            started = time.monotonic()
            cluster.append(T1, [b"b0"])
            assert values(poll_until(c, 1)) == [b"b0"]
            assert time.monotonic() - started < 2.0  # broker 1 still waits its 3 s
            assert cluster.fetches_in_flight[1] == 1
        assert cluster.fetches_in_flight_max[1] == 1 == cluster.fetches_in_flight_max[2]


def test_a_consumer_dropped_without_close_stops_its_thread() -> None:
    with running({"t": 1}) as cluster:
        consumer = Consumer(bootstrap_servers=cluster.bootstrap)
        consumer.assign([T0])
        assert consumer.position(T0) == 0
        fetcher = consumer._fetcher
        del consumer
        gc.collect()
        assert fetcher.join(int(WAIT_S * 1000)), "the fetcher thread has stopped"


def test_an_answer_reaches_poll_without_waiting_for_the_fetcher_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Fetch answer is handed to poll on the thread that receives it (issue 17 §5): the
    fetcher thread, which goes on to send the next Fetch, is a thread hop (a GIL hand-over
    under load) the records need not wait for. Here that thread is held still once the long
    poll is out, and the appended record still reaches poll."""
    held, release = threading.Event(), threading.Event()
    run_once = Fetcher._run_once

    def held_still(self: Fetcher, now_ms: int) -> int:
        if held.is_set():
            release.wait(WAIT_S)
        return run_once(self, now_ms)

    monkeypatch.setattr(Fetcher, "_run_once", held_still)
    with (
        running({"t": 1}) as cluster,
        Consumer(
            bootstrap_servers=cluster.bootstrap,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=30000,
        ) as consumer,
    ):
        consumer.assign([T0])
        assert consumer.position(T0) == 0
        wait_until(lambda: cluster.fetches_in_flight[1] == 1, "a long poll on the broker")
        held.set()
        try:
            cluster.append(T0, [b"a0"])
            assert values(consumer.poll(timeout_ms=WAIT_MS)) == [b"a0"]
        finally:
            release.set()
