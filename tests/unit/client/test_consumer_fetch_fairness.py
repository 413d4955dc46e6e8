"""The fetcher's fairness between brokers when the prefetch buffer has room for few Fetches:
long polls to brokers with nothing new must not keep another broker's partitions waiting."""

from __future__ import annotations

import time

from pykraft.client import Consumer, ConsumerRecord, TopicPartition
from tests.unit.client.fake_broker import WAIT_S, running

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
BATCHES = 10  # T2's batches, one per Fetch: far more than the Fetches it may get by luck
LONG_POLL_MS = 100


def test_long_polls_to_caught_up_brokers_do_not_starve_a_third_broker() -> None:
    with running({"t": 3}, brokers=3) as cluster:
        cluster.move_leader(T1, 2)
        cluster.move_leader(T2, 3)
        for i in range(BATCHES):
            cluster.append(T2, [b"%02d" % i + b"." * 200])
        batch_bytes = len(cluster.logs[T2][0])
        with Consumer(
            bootstrap_servers=cluster.bootstrap,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=LONG_POLL_MS,
            max_partition_fetch_bytes=batch_bytes,
            fetch_max_bytes=batch_bytes,
            fetch_buffer_bytes_max=2 * batch_bytes,  # room for two Fetches, not three
        ) as consumer:
            # T0 and T1 are empty (caught up): their brokers long-poll each Fetch. They come
            # first in the assignment, so an order that follows it alone would always give
            # them the whole buffer and never ask broker 3 again.
            consumer.assign([T0, T1, T2])
            records: list[ConsumerRecord] = []
            deadline = time.monotonic() + WAIT_S
            while len(records) < BATCHES and time.monotonic() < deadline:
                records += consumer.poll(timeout_ms=50)
        assert [(r.partition, r.offset) for r in records] == [(2, i) for i in range(BATCHES)], (
            f"only {len(records)} of T2's {BATCHES} records within {WAIT_S} s"
        )
        assert [r.value[:2] for r in records if r.value] == [b"%02d" % i for i in range(BATCHES)]
        # The caught-up brokers were asked too (the scenario held): long polls, not skipped.
        assert cluster.requests[(1, "Fetch")] > 0
        assert cluster.requests[(2, "Fetch")] > 0
