"""`pykraft produce` and `pykraft consume` through click's CliRunner against a fake broker."""

from __future__ import annotations

import base64
import inspect
import json

import click
import pytest
from click.testing import CliRunner, Result

from pykraft.cli import console_consumer
from pykraft.cli.main import cli
from pykraft.cli.properties import PRODUCER_PROPERTIES
from pykraft.client.producer.producer import Producer
from pykraft.client.types import ConsumerRecord, TopicPartition
from pykraft.proto.record_batch import (
    BatchHeader,
    Compression,
    Record,
    TimestampType,
    decode_batch,
)
from tests.unit.client.fake_broker import FakeCluster, running

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def run(*args: str, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=stdin, env={"PYKRAFT_BOOTSTRAP": ""})


def stored(cluster: FakeCluster, tp: TopicPartition) -> list[tuple[bytes | None, bytes | None]]:
    return [(r.key, r.value) for batch in cluster.logs[tp] for r in decode_batch(batch)]


def records(cluster: FakeCluster, tp: TopicPartition) -> list[Record]:
    return [r for batch in cluster.logs[tp] for r in decode_batch(batch)]


def produce(cluster: FakeCluster, *args: str, stdin: bytes) -> Result:
    return run(
        "produce", "--topic", "t", "--bootstrap-server", cluster.bootstrap, *args, stdin=stdin
    )


@pytest.mark.parametrize(
    ("args", "stdin", "expected"),
    [
        pytest.param(
            [], b"a\nb\n\nc", [(None, b"a"), (None, b"b"), (None, b""), (None, b"c")],
            id="each-line-a-record",
        ),
        pytest.param(
            ["--key-separator", ":", "--acks", "1"], b"k1:v1\nk2:v:2\n",
            [(b"k1", b"v1"), (b"k2", b"v:2")],
            id="key-split-at-the-first-separator",
        ),
        pytest.param(
            ["--key-separator", ":", "--property", "ignore.error=true"], b"k:v\nplain\n",
            [(b"k", b"v"), (None, b"plain")],
            id="ignore-error-sends-a-line-without-separator-as-a-keyless-value",
        ),
    ],
)  # fmt: skip
def test_produce_stores_the_lines_as_records(
    args: list[str], stdin: bytes, expected: list[tuple[bytes | None, bytes | None]]
) -> None:
    with running({"t": 1}) as cluster:
        result = produce(cluster, *args, stdin=stdin)
        assert result.exit_code == 0, result.output
        assert stored(cluster, T0) == expected


@pytest.mark.parametrize(
    ("args", "stdin", "error", "delivered"),
    [
        pytest.param(
            ["--key-separator", "|"], b"k|v\nnokey\n",
            "No key separator found on line number 2: 'nokey'.", [(b"k", b"v")],
            id="line-without-separator",
        ),
        pytest.param(
            ["--property", "parse.key=true", "--property", "key.separator=|"],
            b"k1|v1\nk2|v2\nnokey\nk3|v3\n",
            "No key separator found on line number 3: 'nokey'.",
            [(b"k1", b"v1"), (b"k2", b"v2")],
            id="a-bad-line-stops-the-run-after-the-lines-before-it",
        ),
        pytest.param(
            ["--property", "parse.headers=true"], b"ok:1\tv\nbad\tw\n",
            "No header key separator ':' found in pair 'bad' on line number 2.",
            [(None, b"v")],
            id="a-header-without-its-key-separator",
        ),
    ],
)  # fmt: skip
def test_a_bad_line_is_an_invalid_record_after_the_lines_before_it_are_delivered(
    args: list[str],
    stdin: bytes,
    error: str,
    delivered: list[tuple[bytes | None, bytes | None]],
) -> None:
    with running({"t": 1}) as cluster:
        result = produce(cluster, *args, stdin=stdin)
        assert result.exit_code == 1
        assert result.stderr.startswith(f"Error: INVALID_RECORD: {error}")
        assert len(result.stderr.splitlines()) == 1
        assert stored(cluster, T0) == delivered


def test_produce_to_an_unknown_topic_fails_with_its_code() -> None:
    with running({"t": 1}) as cluster:
        result = run(
            "produce", "--topic", "nope", "--bootstrap-server", cluster.bootstrap,
            "--max-block-ms", "200",
            stdin=b"x\n",
        )  # fmt: skip
        assert result.exit_code == 1
        assert result.stderr.startswith("Error: UNKNOWN_TOPIC_OR_PARTITION: ")


def test_consume_from_beginning_prints_json_lines() -> None:
    with running({"t": 2}) as cluster:
        cluster.append(T0, [b"a0", b"a1"], key=b"k")
        cluster.append(T1, [b"b0"])
        result = run(
            "consume", "--topic", "t", "--bootstrap-server", cluster.bootstrap, "--from-beginning",
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
            "topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value",
            "headers",
        }  # fmt: skip
        assert lines[0]["topic"] == "t" and lines[0]["headers"] == []
        assert "Processed a total of 3 messages" in result.stderr


def test_consume_partition_and_offset_in_text_and_base64() -> None:
    with running({"t": 2}) as cluster:
        cluster.append(T1, [b"b0", b"b1", b"\xff\xfe"])
        args = ["consume", "--topic", "t", "--bootstrap-server", cluster.bootstrap]
        args += ["--partition", "1"]
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
        base = ["consume", "--topic", "t", "--bootstrap-server", cluster.bootstrap]
        no_partition = run(*base, "--offset", "3")
        assert no_partition.exit_code == 2
        assert "--offset needs --partition" in no_partition.stderr
        bad_partition = run(*base, "--partition", "5", "--max-messages", "1")
        assert bad_partition.exit_code == 2
        assert "topic 't' has partitions 0 to 1" in bad_partition.stderr
    assert run("consume", "--topic", "t").exit_code == 2  # no bootstrap at all


def test_produce_reads_headers_keys_and_null_markers_as_kafka_does() -> None:
    with running({"t": 1}) as cluster:
        result = produce(
            cluster,
            "--property", "parse.key=true", "--property", "parse.headers=true",
            "--property", "null.marker=NULL",
            stdin=b"h1:a,h2:NULL\tk1\tv\t1\r\nNULL\tNULL\tNULL\n",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        first, second = records(cluster, T0)
        assert (first.key, first.value) == (b"k1", b"v\t1")
        assert [(h.key, h.value) for h in first.headers] == [("h1", b"a"), ("h2", None)]
        assert (second.key, second.value, second.headers) == (None, None, ())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--property", "parse.keys=true", "--property", "colour=red"],
            "unknown line reader properties 'colour', 'parse.keys'; known: headers.delimiter, "
            "headers.key.separator, headers.separator, ignore.error, key.separator, "
            "null.marker, parse.headers, parse.key",
        ),
        (["--property", "parse.key=yes"], "parse.key must be true or false, not 'yes'"),
        (["--property", "parse.key"], "expected key=value, got 'parse.key'"),
        (["--property", "key.separator="], "key.separator must not be empty"),
        (["--key-separator", ""], "key.separator must not be empty"),
        (
            ["--property", "headers.separator=\t"],
            "headers.delimiter and headers.separator may not be equal",
        ),
        (["--property", "null.marker=:"], "null.marker and headers.key.separator may not be"),
        (
            ["--producer-property", "linger.ms=1", "--producer-property", "key.serializer=x"],
            "unknown producer property 'key.serializer'; known: acks, batch.size,",
        ),
        (["--producer-property", "linger.ms=soon"], "linger.ms must be an integer, not 'soon'"),
        (
            ["--producer-property", "enable.idempotence=true", "--acks", "1"],
            "bad producer config: enable_idempotence=True needs: acks must be 'all'",
        ),
        (["--producer-property", "batch.size=0"], "batch_size must be an integer of at least 1"),
        (
            ["--compression-codec", "lz4", "--compression-type", "gzip"],
            "give --compression-codec or --compression-type, not both",
        ),
        (["--compression-codec", "brotli"], "'brotli' is not one of 'none', 'gzip'"),
    ],
)
def test_bad_produce_arguments_are_one_clear_usage_error(args: list[str], message: str) -> None:
    with running({"t": 1}) as cluster:
        result = produce(cluster, *args, stdin=b"x\n")
        assert result.exit_code == 2, result.output
        assert message in result.stderr
        assert "Traceback" not in result.output
        assert stored(cluster, T0) == []


def test_a_partition_the_topic_lacks_is_a_usage_error() -> None:
    with running({"t": 1}) as cluster:
        result = produce(cluster, "--partition", "3", stdin=b"x\n")
        assert result.exit_code == 2
        assert "Invalid value for '--partition': topic 't' has partitions 0 to 0" in result.stderr


def compression(cluster: FakeCluster, tp: TopicPartition) -> set[Compression]:
    return {BatchHeader.parse(batch).compression for batch in cluster.logs[tp]}


def test_producer_properties_reach_the_producer_and_options_win() -> None:
    with running({"t": 1}) as cluster:
        props = ["--producer-property", "compression.type=gzip", "--producer-property", "acks=1"]
        assert produce(cluster, *props, stdin=b"a\n").exit_code == 0
        assert compression(cluster, T0) == {Compression.GZIP}
        explicit = produce(cluster, *props, "--compression-type", "none", stdin=b"b\n")
        assert explicit.exit_code == 0, explicit.output
        assert compression(cluster, T0) == {Compression.GZIP, Compression.NONE}
        assert stored(cluster, T0) == [(None, b"a"), (None, b"b")]


def test_compression_codec_alone_means_gzip_as_in_kafka() -> None:
    with running({"t": 1}) as cluster:
        result = produce(cluster, "--compression-codec", stdin=b"a\n")
        assert result.exit_code == 0, result.output
        assert compression(cluster, T0) == {Compression.GZIP}
        assert produce(cluster, "--compression-codec", "zstd", stdin=b"b\n").exit_code == 0
        assert compression(cluster, T0) == {Compression.GZIP, Compression.ZSTD}


def test_producer_property_names_are_producer_keywords() -> None:
    keywords = inspect.signature(Producer).parameters
    assert [name for name in PRODUCER_PROPERTIES if name.replace(".", "_") not in keywords] == []


def consume(cluster: FakeCluster, count: int, *args: str) -> Result:
    return run(
        "consume", "--topic", "t", "--bootstrap-server", cluster.bootstrap, "--from-beginning",
        "--max-messages", str(count), *args,
    )  # fmt: skip


def test_consume_prints_the_columns_kafkas_properties_ask_for() -> None:
    with running({"t": 1}) as cluster:
        cluster.append(T0, [b"a0", b"a1"], key=b"k")
        result = consume(
            cluster, 2,
            "--property", "print.timestamp=true", "--property", "print.partition=true",
            "--property", "print.offset=true", "--property", "print.headers=true",
            "--property", "print.key=TRUE", "--property", "key.separator= | ",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines() == [
            "CreateTime:1000 | Partition:0 | Offset:0 | NO_HEADERS | k | a0",
            "CreateTime:1001 | Partition:0 | Offset:1 | NO_HEADERS | k | a1",
        ]


def test_consume_flags_are_shorthands_for_the_properties() -> None:
    with running({"t": 1}) as cluster:
        cluster.append(T0, [b"a0"], key=b"k")
        result = consume(
            cluster, 1, "--print-timestamp", "--print-partition", "--print-offset",
            "--print-headers", "--print-key", "--separator", ",",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert result.stdout == "CreateTime:1000,Partition:0,Offset:0,NO_HEADERS,k,a0\n"


def test_consume_nulls_separators_and_no_value() -> None:
    with running({"t": 1}) as cluster:
        cluster.append(T0, [b"a0", b"a1"])
        nulls = consume(cluster, 2, "--print-key", "--property", "null.literal=<none>")
        assert nulls.stdout == "<none>\ta0\n<none>\ta1\n"
        offsets = consume(
            cluster, 2, "--property", "print.value=false", "--print-offset",
            "--property", "line.separator=;",
        )  # fmt: skip
        assert offsets.exit_code == 0, offsets.output
        assert offsets.stdout == "Offset:0;Offset:1;"


def test_headers_round_trip_from_produce_to_consume() -> None:
    with running({"t": 1}) as cluster:
        sent = produce(
            cluster, "--property", "parse.headers=true", "--property", "null.marker=~",
            stdin=b"h1:a,h2:~\tv1\n",
        )  # fmt: skip
        assert sent.exit_code == 0, sent.output
        text = consume(cluster, 1, "--print-headers", "--property", "headers.separator=;")
        assert text.stdout == "h1:a;h2:null\tv1\n"
        encoded = consume(cluster, 1, "--output", "json")
        line = json.loads(encoded.stdout)
        assert line["headers"] == [{"key": "h1", "value": "a"}, {"key": "h2", "value": None}]
        assert (line["timestamp_type"], line["key"]) == ("CreateTime", None)


def test_unknown_consume_properties_are_named_with_the_known_ones() -> None:
    with running({"t": 1}) as cluster:
        result = consume(cluster, 1, "--property", "print.colour=true")
        assert result.exit_code == 2
        assert (
            "unknown formatter property 'print.colour'; known: headers.separator, "
            "key.separator, line.separator, null.literal, print.headers, print.key, "
            "print.offset, print.partition, print.timestamp, print.value"
        ) in result.stderr
        assert "Traceback" not in result.output


def test_ctrl_c_ends_consume_with_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    polls = iter([[_record(b"v")]])

    class Interrupted:
        def poll(self, timeout_ms: int, records_max: int | None) -> list[ConsumerRecord]:
            for answer in polls:
                return answer
            raise KeyboardInterrupt

    lines: list[str] = []
    monkeypatch.setattr(click, "echo", lambda text, nl=True: lines.append(text))
    count = console_consumer._print_records(Interrupted(), lambda r: "line\n", None, None)  # type: ignore[arg-type]
    assert (count, lines) == (1, ["line\n"])


def _record(value: bytes) -> ConsumerRecord:
    return ConsumerRecord("t", 0, 0, 5, TimestampType.CREATE_TIME, None, value, ())
