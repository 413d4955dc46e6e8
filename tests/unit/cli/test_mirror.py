"""`pykraft mirror` without a cluster: argument and config errors are usage errors (exit 2)
that name what is wrong; what `pykraft mirror status` prints."""

from __future__ import annotations

from pathlib import Path

from pykraft.cli import mirror
from pykraft.client import TopicPartition
from pykraft.mirror.status import PartitionStatus
from tests.unit.cli.test_main import assert_usage_error, run


def test_the_mirror_needs_both_clusters() -> None:
    result = run("mirror", "--source-bootstrap", "h:1")
    assert_usage_error(result, "--source-bootstrap and --target-bootstrap are required")


def test_status_needs_both_clusters() -> None:
    assert_usage_error(run("mirror", "status"), "Missing option '--source-bootstrap'")


def test_a_bad_property_in_the_config_file_is_a_usage_error(tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text("replication.factor=two\n")
    result = run(
        "mirror", "--source-bootstrap", "h:1", "--target-bootstrap", "h:2",
        "--config", str(config),
    )  # fmt: skip
    assert_usage_error(result, "replication.factor must be an integer, not 'two'")


def test_topics_on_the_command_line_are_checked_too() -> None:
    result = run(
        "mirror", "--source-bootstrap", "h:1", "--target-bootstrap", "h:2", "--topics", "("
    )
    assert_usage_error(result, "topics: '(' is not a list of regular expressions")


def test_status_prints_a_row_per_partition() -> None:
    statuses = [
        PartitionStatus(TopicPartition("orders", 0), "east.orders", 120, 100, 12.34),
        PartitionStatus(TopicPartition("orders", 1), "east.orders", 7, None, 0.0),
    ]
    assert mirror._status_table(statuses).splitlines() == [
        "TOPIC   PARTITION  REMOTE-TOPIC  SOURCE-END  MIRRORED  LAG  RECORDS/S",
        "orders  0          east.orders   120         100       20   12.3",
        "orders  1          east.orders   7           -         -    0.0",
    ]
    assert mirror._status_json(statuses[1]) == {
        "topic": "orders",
        "partition": 1,
        "remote_topic": "east.orders",
        "source_end_offset": 7,
        "mirrored_offset": None,
        "lag": None,
        "records_per_second": 0.0,
    }
