"""`ClusterMetadata.known_partition_counts`, what the producer's per-record path reads without a
lock: the counts of followed topics only, gone once the cluster reports the topic's error."""

from __future__ import annotations

from pykraft.client.broker_connection import ConnectionPool
from pykraft.client.cluster_metadata import ClusterMetadata
from tests.unit.client.fake_broker import running


def test_known_counts_hold_followed_topics_until_the_cluster_reports_an_error() -> None:
    with running({"t": 2, "u": 3}) as cluster:
        pool = ConnectionPool(retry_backoff_ms=10)
        metadata = ClusterMetadata(
            [cluster.bootstrap], pool, request_timeout_ms=5000, retry_backoff_ms=10
        )
        try:
            metadata.add_topics(["t"])
            metadata.refresh(now_ms=0)
            assert metadata.known_partition_counts == {"t": 2}
            assert metadata.wait_for_topic("u", timeout_ms=5000) == 3
            assert metadata.known_partition_counts == {"t": 2, "u": 3}
            cluster.delete_topic("t")
            metadata.refresh(now_ms=1)
            assert metadata.known_partition_counts == {"u": 3}
        finally:
            pool.close()
