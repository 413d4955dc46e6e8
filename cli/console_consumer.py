"""`pykraft consume`: Kafka's console consumer.

It prints each record as Kafka's DefaultMessageFormatter does (the value alone unless
`--property print.key=true` and the like ask for more; `pykraft.cli.formatting.RecordFormat`),
or with `--output json` one JSON object a line with every field: {"topic", "partition",
"offset", "timestamp", "timestamp_type", "key", "value", "headers"} where headers is a list of
{"key", "value"}. Keys and values are bytes: they print as UTF-8 text with invalid bytes
replaced by U+FFFD, or as base64 with `--encoding base64`. With `--group G` it joins consumer
group G and reads the partitions the group gives it, from the group's committed offsets (where
the group has none: the end, or the beginning with --from-beginning), committing as it goes and
on exit; without a group it reads every partition (or --partition) itself and commits nothing.

Errors print "Error: CODE: sentence" and exit 1 (the root group turns KafkaError into that);
bad arguments and unknown properties are click usage errors (exit 2).
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

import click

from pykraft.cli.formatting import RecordFormat, format_record, record_json
from pykraft.cli.options import bootstrap_server_option, check_partition, properties_option
from pykraft.cli.properties import from_properties
from pykraft.client.consumer.consumer import Consumer
from pykraft.client.types import ConsumerRecord, TopicPartition

_POLL_INTERVAL_MS = 200


def _record_format(properties: dict[str, str]) -> RecordFormat:
    return from_properties(RecordFormat, properties, "formatter")


@click.command("consume")
@click.option("--topic", required=True, help="Topic to consume from.")
@bootstrap_server_option
@click.option(
    "--from-beginning",
    is_flag=True,
    help="Start at the earliest offset (with --group: where the group has committed none).",
)
@click.option("--partition", type=click.IntRange(min=0), help="Only this partition.")
@click.option(
    "--offset",
    type=click.IntRange(min=0),
    help="Start at this offset (needs --partition); default: the end, or the beginning.",
)
@click.option(
    "--group",
    help="Join this consumer group: read the partitions it assigns, from its committed "
    "offsets, and commit what was printed.",
)
@click.option("--max-messages", type=click.IntRange(min=1), help="Exit after this many.")
@click.option(
    "--timeout-ms",
    type=click.IntRange(min=0),
    help="Exit when no record arrives for this long (default: wait forever).",
)
@properties_option(
    "--property",
    "record_format",
    build=_record_format,
    help="A formatter property, as Kafka's: print.timestamp, print.partition, print.offset, "
    "print.headers, print.key, print.value, key.separator, line.separator, headers.separator, "
    "null.literal. Repeatable.",
)
@click.option("--print-key", is_flag=True, help="print.key=true")
@click.option("--print-partition", is_flag=True, help="print.partition=true")
@click.option("--print-offset", is_flag=True, help="print.offset=true")
@click.option("--print-timestamp", is_flag=True, help="print.timestamp=true")
@click.option("--print-headers", is_flag=True, help="print.headers=true")
@click.option("--separator", help="key.separator: what goes between printed columns.")
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Lines as the properties say, or JSON with every field (properties ignored).",
)
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
    group: str | None,
    max_messages: int | None,
    timeout_ms: int | None,
    record_format: RecordFormat,
    separator: str | None,
    output: str,
    encoding: str,
    **print_flags: bool,
) -> None:
    """Print records of --topic as they arrive."""
    if offset is not None and partition is None:
        raise click.UsageError("--offset needs --partition")
    if offset is not None and from_beginning:
        raise click.UsageError("give --offset or --from-beginning, not both")
    if group is not None and (partition is not None or offset is not None):
        raise click.UsageError(
            "--group reads what the group assigns: not with --partition/--offset"
        )
    fmt = _with_flags(record_format, print_flags, separator)
    show = _json_line(encoding) if output == "json" else _text_line(fmt, encoding)
    reset = "earliest" if from_beginning else "latest"
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset=reset, group_id=group) as consumer:
        if group is not None:
            # Auto commit stores positions past printed records only (poll hands out no more
            # than --max-messages), and close commits them on the way out.
            consumer.subscribe([topic])
        else:
            partitions = consumer.partitions_for(topic)
            if partition is not None:
                check_partition(partitions, topic, partition)
            chosen = partitions if partition is None else [partition]
            consumer.assign([TopicPartition(topic, p) for p in chosen])
            if offset is not None:
                consumer.seek(TopicPartition(topic, chosen[0]), offset)
        count = _print_records(consumer, show, max_messages, timeout_ms)
    click.echo(f"Processed a total of {count} messages", err=True)


def _with_flags(
    fmt: RecordFormat, print_flags: Mapping[str, bool], separator: str | None
) -> RecordFormat:
    """The convenience flags on top of --property: a flag given turns its property on."""
    changes: dict[str, Any] = {name: True for name, given in print_flags.items() if given}
    if separator is not None:
        changes["key_separator"] = separator
    return dataclasses.replace(fmt, **changes)


def _print_records(
    consumer: Consumer,
    show: Callable[[ConsumerRecord], str],
    max_messages: int | None,
    timeout_ms: int | None,
) -> int:
    """Prints records until enough came, the timeout passed, or Ctrl-C (which, as in Kafka,
    ends the run normally with the count)."""
    count, idle_ms = 0, 0
    try:
        while max_messages is None or count < max_messages:
            if timeout_ms is not None and idle_ms >= timeout_ms:
                break
            wait_ms = (
                _POLL_INTERVAL_MS if timeout_ms is None else min(_POLL_INTERVAL_MS, timeout_ms)
            )
            left = None if max_messages is None else max_messages - count
            records = consumer.poll(timeout_ms=wait_ms, records_max=left)
            idle_ms = 0 if records else idle_ms + wait_ms
            for record in records:
                click.echo(show(record), nl=False)
                count += 1
    except KeyboardInterrupt:
        pass
    return count


def _decoder(encoding: str) -> Callable[[bytes], str]:
    if encoding == "base64":
        return lambda data: base64.b64encode(data).decode("ascii")
    return lambda data: data.decode("utf-8", errors="replace")


def _text_line(fmt: RecordFormat, encoding: str) -> Callable[[ConsumerRecord], str]:
    decode = _decoder(encoding)
    return lambda record: format_record(record, fmt, decode)


def _json_line(encoding: str) -> Callable[[ConsumerRecord], str]:
    decode = _decoder(encoding)
    return lambda record: json.dumps(record_json(record, decode), ensure_ascii=False) + "\n"
