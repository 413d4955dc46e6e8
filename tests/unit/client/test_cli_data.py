"""`pykraft produce` and `pykraft consume` through click's CliRunner against a fake broker."""

from __future__ import annotations

import base64
import json

from click.testing import CliRunner, Result

from pykraft.client.cli import cli
from pykraft.client.types import TopicPartition
from pykraft.proto.record_batch import decode_batch
from tests.unit.client.fake_broker import FakeCluster, running

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def run(*args: str, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=stdin, env={"PYKRAFT_BOOTSTRAP": ""})


def stored(cluster: FakeCluster, tp: TopicPartition) -> list[tuple[bytes | None, bytes | None]]:
    return [(r.key, r.value) for batch in cluster.logs[tp] for r in decode_batch(batch)]


def test_produce_sends_each_line_as_a_record() -> None:
    with running({"t": 1}) as cluster:
        result = run("produce", "t", "--bootstrap-server", cluster.bootstrap, stdin=b"a\nb\n\nc")
        assert result.exit_code == 0, result.output
        assert stored(cluster, T0) == [(None, b"a"), (None, b"b"), (None, b""), (None, b"c")]


def test_produce_splits_keys_at_the_first_separator() -> None:
    with running({"t": 1}) as cluster:
        result = run(
            "produce", "t", "--bootstrap-server", cluster.bootstrap,
            "--key-separator", ":", "--acks", "1",
            stdin=b"k1:v1\nk2:v:2\n",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert stored(cluster, T0) == [(b"k1", b"v1"), (b"k2", b"v:2")]


def test_produce_line_without_separator_is_an_error() -> None:
    with running({"t": 1}) as cluster:
        result = run(
            "produce", "t", "--bootstrap-server", cluster.bootstrap,
            "--key-separator", "|", stdin=b"k|v\nnokey\n",
        )  # fmt: skip
        assert result.exit_code == 1
        assert "Error: INVALID_RECORD: line 2 has no key separator '|'" in result.stderr


def test_produce_to_an_unknown_topic_fails_with_its_code() -> None:
    with running({"t": 1}) as cluster:
        result = run(
            "produce", "nope", "--bootstrap-server", cluster.bootstrap, "--max-block-ms", "200",
            stdin=b"x\n",
        )  # fmt: skip
        assert result.exit_code == 1
        assert result.stderr.startswith("Error: UNKNOWN_TOPIC_OR_PARTITION: ")


def test_consume_from_beginning_prints_json_lines() -> None:
    with running({"t": 2}) as cluster:
        cluster.append(T0, [b"a0", b"a1"], key=b"k")
        cluster.append(T1, [b"b0"])
        result = run(
            "consume", "t", "--bootstrap-server", cluster.bootstrap, "--from-beginning",
            "--max-messages", "3", "--output", "json",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        lines = [json.loads(line) for line in result.stdout.splitlines()]
        assert sorted((x["partition"], x["offset"], x["key"], x["value"]) for x in lines) == [
            (0, 0, "k", "a0"),
            (0, 1, "k", "a1"),
            (1, 0, None, "b0"),
        ]
        assert set(lines[0]) == {
            "topic", "partition", "offset", "timestamp", "key", "value", "headers"
        }  # fmt: skip
        assert lines[0]["topic"] == "t" and lines[0]["headers"] == []
        assert "Processed a total of 3 messages" in result.stderr


def test_consume_partition_and_offset_in_text_and_base64() -> None:
    with running({"t": 2}) as cluster:
        cluster.append(T1, [b"b0", b"b1", b"\xff\xfe"])
        args = ["consume", "t", "--bootstrap-server", cluster.bootstrap, "--partition", "1"]
        text = run(*args, "--offset", "1", "--max-messages", "2")
        assert text.exit_code == 0, text.output
        assert text.stdout.splitlines() == ["b1", "\ufffd\ufffd"]
        encoded = run(*args, "--offset", "2", "--timeout-ms", "300", "--output", "json",
                      "--encoding", "base64")  # fmt: skip
        assert encoded.exit_code == 0, encoded.output
        (line,) = encoded.stdout.splitlines()
        assert base64.b64decode(json.loads(line)["value"]) == b"\xff\xfe"
        assert "Processed a total of 1 messages" in encoded.stderr


def test_consume_argument_errors_exit_2() -> None:
    with running({"t": 2}) as cluster:
        base = ["consume", "t", "--bootstrap-server", cluster.bootstrap]
        no_partition = run(*base, "--offset", "3")
        assert no_partition.exit_code == 2
        assert "--offset needs --partition" in no_partition.stderr
        bad_partition = run(*base, "--partition", "5", "--max-messages", "1")
        assert bad_partition.exit_code == 2
        assert "topic 't' has partitions 0 to 1" in bad_partition.stderr
    assert run("consume", "t").exit_code == 2  # no bootstrap at all
