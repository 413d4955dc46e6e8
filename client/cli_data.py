"""`pykraft produce` and `pykraft consume`: Kafka's console producer and consumer.

produce reads stdin line by line (bytes, the newline removed), one record per line; with
`--key-separator SEP` each line is KEY SEP VALUE, split at the first SEP, and a line without
SEP is an error. consume prints each record's value as a line, or with `--output json` one JSON
object a line: {"topic", "partition", "offset", "timestamp", "key", "value", "headers"} where
headers is a list of {"key", "value"}. Keys and values are bytes: they print as UTF-8 text with
invalid bytes replaced by U+FFFD, or as base64 with `--encoding base64`, and null stays null.
Errors print "Error: CODE: sentence" and exit 1 (the root group turns KafkaError into that);
bad arguments exit 2.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import Future

import click

from pykraft.client.consumer.consumer import Consumer
from pykraft.client.errors import InvalidRecordError
from pykraft.client.producer.producer import Producer
from pykraft.client.routing import parse_bootstrap
from pykraft.client.types import ConsumerRecord, RecordMetadata, TopicPartition

# A bound on the records produce keeps unconfirmed before it waits for them.
_PRODUCE_WINDOW_RECORDS = 10_000
_POLL_INTERVAL_MS = 200


def bootstrap_callback(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    """Checks a --bootstrap-* option's addresses (a usage error, exit 2, if malformed)."""
    try:
        return parse_bootstrap(value)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx, param) from None


# The --bootstrap-server option of every data-plane command (produce, consume, perf).
bootstrap_server_option = click.option(
    "--bootstrap-server",
    "bootstrap",
    envvar="PYKRAFT_BOOTSTRAP",
    required=True,
    callback=bootstrap_callback,
    metavar="HOST:PORT[,HOST:PORT...]",
    help="Brokers to contact first; env PYKRAFT_BOOTSTRAP.",
)


@click.command("produce")
@click.argument("topic")
@bootstrap_server_option
@click.option("--key-separator", help="Read each line as KEY<SEP>VALUE (split at the first).")
@click.option(
    "--acks", type=click.Choice(["all", "-1", "0", "1"]), default="all", show_default=True
)
@click.option("--partition", type=click.IntRange(min=0), help="Default: the partitioner's pick.")
@click.option(
    "--compression-type",
    type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
    default="none",
    show_default=True,
)
@click.option("--linger-ms", type=click.IntRange(min=0), default=5, show_default=True)
@click.option(
    "--max-block-ms",
    type=click.IntRange(min=0),
    default=60000,
    show_default=True,
    help="How long to wait for the topic's metadata and for buffer space.",
)
@click.option("--request-timeout-ms", type=click.IntRange(min=1), default=30000, show_default=True)
def produce(
    topic: str,
    bootstrap: list[str],
    key_separator: str | None,
    acks: str,
    partition: int | None,
    compression_type: str,
    linger_ms: int,
    max_block_ms: int,
    request_timeout_ms: int,
) -> None:
    """Send each line of stdin as a record to TOPIC."""
    if key_separator == "":
        raise click.BadParameter("must not be empty", param_hint="'--key-separator'")
    separator = key_separator.encode() if key_separator is not None else None
    with Producer(
        bootstrap_servers=bootstrap,
        acks=acks,
        compression_type=compression_type,
        linger_ms=linger_ms,
        max_block_ms=max_block_ms,
        request_timeout_ms=request_timeout_ms,
        delivery_timeout_ms=max(120000, linger_ms + request_timeout_ms),
    ) as producer:
        pending: list[Future[RecordMetadata]] = []
        stdin = sys.stdin.buffer
        for number, line in enumerate(iter(stdin.readline, b""), start=1):
            key, value = _split(line.rstrip(b"\n"), separator, number)
            pending.append(producer.send(topic, value, key=key, partition=partition))
            if len(pending) >= _PRODUCE_WINDOW_RECORDS:
                _confirm(pending)
                pending = []
        producer.flush()
        _confirm(pending)


def _split(line: bytes, separator: bytes | None, number: int) -> tuple[bytes | None, bytes]:
    if separator is None:
        return None, line
    key, found, value = line.partition(separator)
    if not found:
        raise InvalidRecordError(f"line {number} has no key separator {separator.decode()!r}")
    return key, value


def _confirm(futures: list[Future[RecordMetadata]]) -> None:
    """Waits for each record; raises the first failure (a KafkaError)."""
    for future in futures:
        future.result()


@click.command("consume")
@click.argument("topic")
@bootstrap_server_option
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset.")
@click.option("--partition", type=click.IntRange(min=0), help="Only this partition.")
@click.option(
    "--offset",
    type=click.IntRange(min=0),
    help="Start at this offset (needs --partition); default: the end, or the beginning.",
)
@click.option("--max-messages", type=click.IntRange(min=1), help="Exit after this many.")
@click.option(
    "--timeout-ms",
    type=click.IntRange(min=0),
    help="Exit when no record arrives for this long (default: wait forever).",
)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--encoding",
    type=click.Choice(["utf8", "base64"]),
    default="utf8",
    show_default=True,
    help="How keys and values print: UTF-8 (bad bytes replaced) or base64.",
)
def consume(
    topic: str,
    bootstrap: list[str],
    from_beginning: bool,
    partition: int | None,
    offset: int | None,
    max_messages: int | None,
    timeout_ms: int | None,
    output: str,
    encoding: str,
) -> None:
    """Print records of TOPIC as they arrive."""
    if offset is not None and partition is None:
        raise click.UsageError("--offset needs --partition")
    if offset is not None and from_beginning:
        raise click.UsageError("give --offset or --from-beginning, not both")
    reset = "earliest" if from_beginning else "latest"
    show = _json_line(encoding) if output == "json" else _text_line(encoding)
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset=reset) as consumer:
        partitions = consumer.partitions_for(topic)
        if partition is not None and partition not in partitions:
            raise click.BadParameter(
                f"topic {topic!r} has partitions 0 to {len(partitions) - 1}",
                param_hint="'--partition'",
            )
        chosen = partitions if partition is None else [partition]
        consumer.assign([TopicPartition(topic, p) for p in chosen])
        if offset is not None:
            consumer.seek(TopicPartition(topic, chosen[0]), offset)
        count = _print_records(consumer, show, max_messages, timeout_ms)
    click.echo(f"Processed a total of {count} messages", err=True)


def _print_records(
    consumer: Consumer,
    show: Callable[[ConsumerRecord], str],
    max_messages: int | None,
    timeout_ms: int | None,
) -> int:
    count, idle_ms = 0, 0
    while max_messages is None or count < max_messages:
        if timeout_ms is not None and idle_ms >= timeout_ms:
            break
        wait_ms = _POLL_INTERVAL_MS if timeout_ms is None else min(_POLL_INTERVAL_MS, timeout_ms)
        left = None if max_messages is None else max_messages - count
        records = consumer.poll(timeout_ms=wait_ms, max_records=left)
        idle_ms = 0 if records else idle_ms + wait_ms
        for record in records:
            click.echo(show(record))
        count += len(records)
    return count


def _decoder(encoding: str) -> Callable[[bytes | None], str | None]:
    def decode(data: bytes | None) -> str | None:
        if data is None:
            return None
        if encoding == "base64":
            return base64.b64encode(data).decode("ascii")
        return data.decode("utf-8", errors="replace")

    return decode


def _text_line(encoding: str) -> Callable[[ConsumerRecord], str]:
    decode = _decoder(encoding)
    return lambda record: decode(record.value) or ""


def _json_line(encoding: str) -> Callable[[ConsumerRecord], str]:
    decode = _decoder(encoding)

    def line(record: ConsumerRecord) -> str:
        return json.dumps(
            {
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "timestamp": record.timestamp,
                "key": decode(record.key),
                "value": decode(record.value),
                "headers": [{"key": k, "value": decode(v)} for k, v in record.headers],
            },
            ensure_ascii=False,
        )

    return line


COMMANDS: Iterable[click.Command] = (produce, consume)
