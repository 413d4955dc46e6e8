"""A broker restart loads its stored metadata image and fetches only the tail (issue 18 §2.2).

One controller whose MetadataFetch messages are at most 64 KiB and that keeps a tail of 1,000
records (older fetches get a snapshot), broker 2 holding a topic of 2,000
partitions (some 90 KB of metadata records), and broker 1, the one restarted, holding none (so
its controlled shutdown and return change no partition: the tail stays small). Broker 1 stops;
the topic's config changes while it is down; it starts again. The counter of records it fetched
shows only the records after its stored image, not the whole image, and it ends with the
controller's image. Then its stored
image is torn (as a crash in the middle of a write with no atomic rename would leave it): it
must not be trusted, so the next start fetches the whole image (a snapshot in several chunks)
and again ends with the controller's image.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from pykraft.metadata_log import MetadataImage

from .cluster import make_broker, start_brokers, wait_until_brokers_know
from .controllers import Quorum, run_cli, running_quorum
from .metrics_scrape import scrape, with_metrics
from .processes import BrokerProcess, wait_for

pytestmark = pytest.mark.integration

BIG_PARTITIONS: Final = 2000
FETCH_BYTES_MAX: Final = 64 * 1024
RECORDS_FETCHED: Final = "pykraft_broker_metadata_records_fetched_total"


def _create(quorum: Quorum, topic: str, partitions: int) -> None:
    created = run_cli(
        quorum, "topics", "create", "--topic", topic,
        "--partitions", str(partitions), "--replication-factor", "1",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr


def _records_fetched(metrics_address: str) -> float:
    return scrape(metrics_address)[(RECORDS_FETCHED, ())]


def _same_image(quorum: Quorum, broker: BrokerProcess) -> MetadataImage | None:
    """The controller's image when the broker's stored one equals it (None otherwise)."""
    controller = quorum.image()
    return controller if broker.stored_image() == controller else None


def _restart(quorum: Quorum, broker: BrokerProcess) -> MetadataImage:
    """Starts `broker` and waits until it is unfenced and has applied the controller's image."""
    start_brokers(quorum, {broker.node_id: broker}, timeout_s=60)
    return wait_for(lambda: _same_image(quorum, broker), timeout_s=30, what="equal images")


def test_a_restarted_broker_fetches_only_the_tail_unless_its_image_is_torn(
    tmp_path: Path,
) -> None:
    controller_args = (
        "--metadata-fetch-bytes-max", str(FETCH_BYTES_MAX),
        "--metadata-tail-records-max", "1000",
    )  # fmt: skip
    with running_quorum(tmp_path, size=1, extra_args=controller_args) as quorum:
        holder = make_broker(tmp_path, quorum, 2)
        broker = make_broker(tmp_path, quorum, 1)
        metrics_address = with_metrics(broker)
        try:
            start_brokers(quorum, {2: holder})
            _create(quorum, "big", BIG_PARTITIONS)
            wait_until_brokers_know({2: holder}, "big", BIG_PARTITIONS, timeout_s=60)
            _restart(quorum, broker)
            assert broker.stop(timeout_s=30) == 0
            stored = broker.stored_image()
            assert stored.topics.get_by_name("big") is not None

            altered = run_cli(
                quorum, "configs", "alter", "--entity-type", "topics", "--entity-name", "big",
                "--add-config", "retention.ms=3600000",
            )  # fmt: skip
            assert altered.returncode == 0, altered.stderr
            image = _restart(quorum, broker)
            assert image.configs.resources  # the change made while the broker was down
            image_records = len(image.write())
            assert image_records > BIG_PARTITIONS
            # The config, the broker's shutdown, registration and unfencing: a handful of records.
            fetched = _records_fetched(metrics_address)
            assert 1 <= fetched < 100, (fetched, image_records)

            assert broker.stop(timeout_s=30) == 0
            torn = broker.image_path.read_bytes()
            broker.image_path.write_bytes(torn[: len(torn) * 2 // 3])
            image = _restart(quorum, broker)
            assert _records_fetched(metrics_address) >= image_records  # everything again
            log_text = broker.log_path.read_text()
            assert "fetching all metadata again" in log_text
            assert "metadata snapshot as of offset" in log_text
        finally:
            broker.close()
            holder.close()
