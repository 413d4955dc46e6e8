"""`pykraft produce`: Kafka's console producer.

It reads stdin line by line (bytes; "\\n" or "\\r\\n" removed), one record per line, as
Kafka's LineMessageReader does: with `--property parse.key=true` a line is KEY<key.separator>VALUE
split at the first separator, with `parse.headers=true` it starts with
h1:v1,h2:v2<headers.delimiter>, and a field equal to `null.marker` is null (`LineReader`).
`--key-separator SEP` is short for parse.key=true key.separator=SEP. A line that cannot be read
stops the run with INVALID_RECORD after the records before it were delivered, unless
ignore.error=true. `--producer-property` takes Kafka's producer configs
(`pykraft.cli.properties.PRODUCER_PROPERTIES`); an explicit option (--acks, --linger-ms, ...)
wins over them, and they win over option defaults, as in Kafka.

Errors print "Error: CODE: sentence" and exit 1 (the root group turns KafkaError into that);
bad arguments and unknown properties are click usage errors (exit 2).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import click
from click.core import ParameterSource

from pykraft.cli.options import bootstrap_server_option, check_partition, properties_option
from pykraft.cli.properties import from_properties, producer_kwargs
from pykraft.client.errors import InvalidRecordError
from pykraft.client.producer.producer import Producer
from pykraft.client.types import RecordMetadata

# A bound on the records produce keeps unconfirmed before it waits for them.
_UNCONFIRMED_RECORDS_MAX = 10_000
_LINE_SHOWN_CHARS_MAX = 80  # how much of a bad input line an error message quotes
_DELIVERY_TIMEOUT_MS = 120000  # Kafka's delivery.timeout.ms default


@dataclass(frozen=True)
class LineReader:
    """Kafka's LineMessageReader and its --property names and defaults: parse.key,
    key.separator, parse.headers, headers.delimiter, headers.separator (taken literally, where
    Kafka reads a regular expression), headers.key.separator, ignore.error and null.marker."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    ignore_error: bool = False
    null_marker: str | None = None

    def __post_init__(self) -> None:
        """Kafka's checks: no empty separators, and no two that the parser could confuse."""
        separators = {
            "key.separator": self.key_separator,
            "headers.delimiter": self.headers_delimiter,
            "headers.separator": self.headers_separator,
            "headers.key.separator": self.headers_key_separator,
        }
        for name, separator in separators.items():
            if not separator:
                raise ValueError(f"{name} must not be empty")
        distinct = [
            ("headers.delimiter", "headers.separator"),
            ("headers.delimiter", "headers.key.separator"),
            ("headers.separator", "headers.key.separator"),
        ]
        for a, b in distinct:
            if separators[a] == separators[b]:
                raise ValueError(f"{a} and {b} may not be equal")
        for name, separator in separators.items():
            if separator == self.null_marker:
                raise ValueError(f"null.marker and {name} may not be equal")

    def read(self, line: bytes, number: int) -> LineRecord:
        """The record a line (without its newline) stands for; InvalidRecordError, naming the
        1-based line `number`, when a separator is missing and ignore.error is off."""
        start = 0
        headers: bytes | None = None
        if self.parse_headers:
            delimiter = self.headers_delimiter
            headers, start = self._field(line, start, delimiter, "headers delimiter", number)
        key: bytes | None = None
        if self.parse_key:
            key, start = self._field(line, start, self.key_separator, "key separator", number)
        return LineRecord(
            key=self._nullable(key),
            value=self._nullable(line[start:]),
            headers=self._headers(headers, number),
        )

    def _field(
        self, line: bytes, start: int, separator: str, what: str, number: int
    ) -> tuple[bytes | None, int]:
        """The text from `start` up to `separator`, and where the rest begins."""
        end = line.find(separator.encode(), start)
        if end >= 0:
            return line[start:end], end + len(separator.encode())
        if self.ignore_error:
            return None, start
        raise InvalidRecordError(
            f"No {what} found on line number {number}: {_shown(line)}. Records before it "
            f"were sent; fix the line or set --property ignore.error=true."
        )

    def _nullable(self, data: bytes | None) -> bytes | None:
        marker = self.null_marker
        return None if data is None or (marker is not None and data == marker.encode()) else data

    def _headers(self, text: bytes | None, number: int) -> list[tuple[str, bytes | None]]:
        if text is None or self._nullable(text) is None:
            return []
        return [self._header(pair, number) for pair in text.split(self.headers_separator.encode())]

    def _header(self, pair: bytes, number: int) -> tuple[str, bytes | None]:
        key, found, value = pair.partition(self.headers_key_separator.encode())
        if not found:
            if self.ignore_error:
                return pair.decode(errors="replace"), None
            raise InvalidRecordError(
                f"No header key separator {self.headers_key_separator!r} found in pair "
                f"{_shown(pair)} on line number {number}. Records before it were sent."
            )
        if self.null_marker is not None and key == self.null_marker.encode():
            raise InvalidRecordError(
                f"A header key equals null.marker {self.null_marker!r} on line number {number}:"
                " header keys cannot be null. Records before it were sent."
            )
        return key.decode(errors="replace"), self._nullable(value)


@dataclass(frozen=True)
class LineRecord:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _shown(data: bytes) -> str:
    """Input quoted for an error message: decoded, escaped, cut to a readable length."""
    text = data.decode(errors="replace")
    if len(text) > _LINE_SHOWN_CHARS_MAX:
        text = text[:_LINE_SHOWN_CHARS_MAX] + "..."
    return repr(text)


# The produce options that are Producer configs: option name -> Producer keyword.
_PRODUCER_OPTIONS = {
    "acks": "acks",
    "compression_type": "compression_type",
    "compression_codec": "compression_type",
    "linger_ms": "linger_ms",
    "max_block_ms": "max_block_ms",
    "request_timeout_ms": "request_timeout_ms",
}


def _producer_config(ctx: click.Context, properties: Mapping[str, object]) -> dict[str, Any]:
    """The Producer's keywords, with Kafka's precedence: an option given on the command line
    wins over --producer-property, which wins over the option's default."""
    kwargs: dict[str, Any] = dict(properties)
    for option, keyword in _PRODUCER_OPTIONS.items():
        value = ctx.params[option]
        if value is not None and (_explicit(ctx, option) or keyword not in kwargs):
            kwargs[keyword] = value
    linger_ms, request_timeout_ms = kwargs["linger_ms"], kwargs["request_timeout_ms"]
    if "delivery_timeout_ms" not in kwargs and isinstance(linger_ms, int):
        # Kafka's default, stretched so the Producer's delivery >= linger + request check holds.
        assert isinstance(request_timeout_ms, int)
        kwargs["delivery_timeout_ms"] = max(_DELIVERY_TIMEOUT_MS, linger_ms + request_timeout_ms)
    return kwargs


_COMPRESSION = click.Choice(["none", "gzip", "snappy", "lz4", "zstd"])


@click.command("produce")
@click.option("--topic", required=True, help="Topic to produce to.")
@bootstrap_server_option
@properties_option(
    "--property",
    "reader",
    build=lambda p: from_properties(LineReader, p, "line reader"),
    help="A line reader property, as Kafka's: parse.key, key.separator, parse.headers, "
    "headers.delimiter, headers.separator, headers.key.separator, ignore.error, null.marker. "
    "Repeatable.",
)
@click.option(
    "--key-separator", help="Read each line as KEY<SEP>VALUE: parse.key=true key.separator=SEP."
)
@properties_option(
    "--producer-property",
    "producer_properties",
    build=producer_kwargs,
    help="A Kafka producer config (acks, linger.ms, batch.size, compression.type, "
    "enable.idempotence, ...). Repeatable.",
)
@click.option(
    "--acks",
    "--request-required-acks",
    "acks",
    type=click.Choice(["all", "-1", "0", "1"]),
    default="all",
    show_default=True,
)
@click.option("--partition", type=click.IntRange(min=0), help="Default: the partitioner's pick.")
@click.option("--compression-type", type=_COMPRESSION, default="none", show_default=True)
@click.option(
    "--compression-codec",
    type=_COMPRESSION,
    is_flag=False,
    flag_value="gzip",
    help="Kafka's console producer name for --compression-type; alone, it means gzip.",
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
@click.pass_context
def produce(
    ctx: click.Context,
    /,
    topic: str,
    bootstrap: list[str],
    reader: LineReader,
    key_separator: str | None,
    producer_properties: dict[str, object],
    acks: str,
    partition: int | None,
    compression_type: str,
    compression_codec: str | None,
    linger_ms: int,
    max_block_ms: int,
    request_timeout_ms: int,
) -> None:
    """Send each line of stdin as a record to --topic."""
    reader = _with_key_separator(ctx, reader, key_separator)
    if compression_codec is not None and _explicit(ctx, "compression_type"):
        raise click.UsageError("give --compression-codec or --compression-type, not both")
    kwargs = _producer_config(ctx, producer_properties)
    try:
        producer = Producer(bootstrap_servers=bootstrap, **kwargs)
    except ValueError as e:
        raise click.UsageError(f"bad producer config: {e}") from None
    with producer:
        if partition is not None:
            check_partition(producer.partitions_for(topic), topic, partition)
        lines = iter(sys.stdin.buffer.readline, b"")
        _send_lines(producer, topic, partition, reader, lines)


def _explicit(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)


def _with_key_separator(
    ctx: click.Context, reader: LineReader, key_separator: str | None
) -> LineReader:
    """--key-separator SEP as parse.key=true key.separator=SEP (a usage error if invalid)."""
    if key_separator is None:
        return reader
    try:
        return dataclasses.replace(reader, parse_key=True, key_separator=key_separator)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx, param_hint="'--key-separator'") from None


class _Delivery(Protocol):
    """What `Producer.send` returns, as far as produce needs it."""

    def result(self, timeout: float | None = None) -> RecordMetadata: ...


def _send_lines(
    producer: Producer,
    topic: str,
    partition: int | None,
    reader: LineReader,
    lines: Iterator[bytes],
) -> None:
    """Sends a record per line, keeping at most a window of them unconfirmed. A line that
    cannot be read ends the input: what came before is delivered (or fails) first, so the
    error never hides a lost record and no part of the bad line is sent."""
    pending: list[_Delivery] = []
    bad_line: InvalidRecordError | None = None
    for number, line in enumerate(lines, start=1):
        try:
            record = reader.read(_strip_newline(line), number)
        except InvalidRecordError as e:
            bad_line = e
            break
        pending.append(
            producer.send(
                topic, record.value, key=record.key, partition=partition, headers=record.headers
            )
        )
        if len(pending) >= _UNCONFIRMED_RECORDS_MAX:
            _confirm(pending)
            pending = []
    producer.flush()
    _confirm(pending)
    if bad_line is not None:
        raise bad_line


def _strip_newline(line: bytes) -> bytes:
    """The line without "\\n" or "\\r\\n", as Java's readLine returns it."""
    if line.endswith(b"\r\n"):
        return line[:-2]
    return line[:-1] if line.endswith(b"\n") else line


def _confirm(futures: Sequence[_Delivery]) -> None:
    """Waits for each record; raises the first failure (a KafkaError)."""
    for future in futures:
        future.result()
