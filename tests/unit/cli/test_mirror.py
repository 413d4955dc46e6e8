"""`pykraft mirror` argument and config errors, without a cluster: usage errors (exit 2) that
name what is wrong."""

from __future__ import annotations

from pathlib import Path

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
