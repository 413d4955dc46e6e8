"""Hypothesis strategies for Kafka requests, read from kio's classes: any request of any API key
and version the listener serves, with values chosen to hurt (issue 14).

Why from kio's classes: they are generated from Kafka's JSON schemas, so every field of every
version is reached, and a version the listener starts to advertise is fuzzed with no code here.
Each field's value follows its Kafka type: numbers at and near their type's bounds, strings empty,
huge, non-ASCII or naming what exists (`Vocabulary`), arrays null (where the schema allows it),
empty or long, records valid, corrupt or random bytes. Half the requests are tame instead:
every value one a server may accept (names that exist, small numbers, valid batches), so they
get past the first check and reach what lies behind it (`_Fields`). Every `timedelta_i32` of a
request is a wait or a timeout, drawn short (`WAITS_MS`): a served request then answers within
moments, and one that does not is the server's hang, not the fuzzer's patience. A session
timeout may also be the least a classic group accepts (which JoinGroup v0 also waits).

`KafkaRequest.frame()` encodes with kio and, in flexible versions, adds unknown tagged fields to
the request header and body: Kafka's readers skip tags they do not know (KIP-482).
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import uuid
from dataclasses import dataclass
from typing import Any, Final

from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.schema.types import GroupId, ProducerId, TopicName, TransactionalId
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)
from kio.serial.writers import write_unsigned_varint
from kio.static.primitive import Interval, i32Timedelta, i64Timedelta, uvarint

from pykraft.broker.kafka.codec import SIZE

from ..messages import INT64_EDGES, any_records, nasty_texts, valid_batches

LEGACY_STRING_BYTES_MAX: Final = 32_767  # an int16 length
ARRAY_ITEMS_MAX: Final = 3
ARRAY_REPEAT_MAX: Final = 100  # a top-level array drawn once, repeated: long, with duplicates
BYTES_MAX: Final = 64
BIG_BYTES: Final = 70_000  # a bytes field longer than 64 KiB
WAITS_MS: Final = (-(2**31), -1, 0, 1, 50, 250)
SESSION_TIMEOUT_MS: Final = 6_000  # the least a classic group member may ask for
TIMEDELTA_I64_MS: Final = (-1, 0, 1, 86_400_000, 2**31, 2**40)
TAGS_MAX: Final = 3
TAG_BYTES_MAX: Final = 32
UNKNOWN_TAG_MIN: Final = 100  # requests' own tags are small numbers (0-3)
# The values a field takes that a server accepts, where they are few (`_Fields.integers`).
ACCEPTED: Final = {"acks": (-1, 0, 1)}
# Strings a server may accept where the type says nothing more: no member id yet, a protocol
# type and an assignor, a config name, a rack.
TAME_TEXT: Final = ("", "consumer", "range", "cleanup.policy", "fuzz")


@dataclass(frozen=True)
class Vocabulary:
    """What exists where the requests go, so some of them are served rather than refused."""

    topics: tuple[str, ...]
    topic_ids: tuple[uuid.UUID, ...]
    groups: tuple[str, ...]


@dataclass(frozen=True)
class KafkaRequest:
    """One request as a client would send it, plus unknown tagged fields (flexible only)."""

    body: Any  # kio's request entity of some API key and version
    correlation_id: int
    client_id: str | None
    header_tags: tuple[tuple[int, bytes], ...] = ()
    body_tags: tuple[tuple[int, bytes], ...] = ()

    @property
    def api(self) -> tuple[int, int]:
        return int(self.body.__api_key__), int(self.body.__version__)

    def frame(self) -> bytes:
        """The request frame, size prefix included."""
        header_type = type(self.body).__header_schema__
        header = header_type(
            request_api_key=self.body.__api_key__,
            request_api_version=self.body.__version__,
            correlation_id=self.correlation_id,
            client_id=self.client_id,
        )
        head = _encoded(header_type, header)
        if type(self.body).__flexible__:
            head = _with_tags(head, self.header_tags)
        payload = head + self.body_bytes(tagged=True)
        return SIZE.pack(len(payload)) + payload

    def body_bytes(self, *, tagged: bool = False) -> bytes:
        """The body as kio writes it; `tagged`: with the unknown tags `frame` adds to it."""
        body = _encoded(type(self.body), self.body)
        if tagged and type(self.body).__flexible__:
            return _with_tags(body, self.body_tags)
        return body


def _encoded(entity_type: type[Any], entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(entity_type)(buffer, entity)
    return buffer.getvalue()


def _with_tags(encoded: bytes, tags: tuple[tuple[int, bytes], ...]) -> bytes:
    """`encoded` (an entity whose own tagged-field section is empty: its last byte, 0) with
    `tags` as that section."""
    if not tags:
        return encoded
    assert encoded[-1] == 0, "the entity has tagged fields of its own"
    buffer = io.BytesIO()
    buffer.write(encoded[:-1])
    write_unsigned_varint(buffer, uvarint(len(tags)))
    for tag, data in tags:
        write_unsigned_varint(buffer, uvarint(tag))
        write_unsigned_varint(buffer, uvarint(len(data)))
        buffer.write(data)
    return buffer.getvalue()


def unknown_tags() -> st.SearchStrategy[tuple[tuple[int, bytes], ...]]:
    """None, usually; else some (`some_unknown_tags`)."""
    return st.one_of(st.just(()), st.just(()), some_unknown_tags())


def some_unknown_tags() -> st.SearchStrategy[tuple[tuple[int, bytes], ...]]:
    """1 to TAGS_MAX tags no request schema uses, in ascending order."""
    tags = st.lists(
        st.integers(UNKNOWN_TAG_MIN, 2**31 - 1), min_size=1, max_size=TAGS_MAX, unique=True
    )
    drawn = st.tuples(tags, st.lists(st.binary(max_size=TAG_BYTES_MAX), min_size=TAGS_MAX))
    return drawn.map(lambda pair: tuple(zip(sorted(pair[0]), pair[1], strict=False)))


def requests(key: int, version: int, vocabulary: Vocabulary) -> st.SearchStrategy[KafkaRequest]:
    """Requests of API `key` at `version`, hostile or tame (`_Fields`), with any correlation
    id and client id."""
    body_type = load_request_schema(key, version)
    own_tags = any(get_field_tag(field) is not None for field in dataclasses.fields(body_type))
    bodies = st.one_of(
        _Fields(vocabulary, tame=False).entity(body_type, depth=0),
        _Fields(vocabulary, tame=True).entity(body_type, depth=0),
    )
    return st.builds(
        KafkaRequest,
        body=bodies,
        correlation_id=st.integers(-(2**31), 2**31 - 1),
        client_id=st.one_of(st.none(), nasty_texts).filter(_fits_legacy),
        header_tags=unknown_tags(),
        body_tags=st.just(()) if own_tags else unknown_tags(),
    )


class _Fields:
    """Strategies for the fields of kio entities. Hostile: every value that hurts (module
    docstring). Tame: only values a server may accept, as far as the schema tells (names that
    exist, small numbers, valid batches, short arrays), so requests get past the first check
    and reach what lies behind it."""

    def __init__(self, vocabulary: Vocabulary, *, tame: bool) -> None:
        self.vocabulary = vocabulary
        self.tame = tame

    def entity(self, entity_type: type[Any], depth: int) -> st.SearchStrategy[Any]:
        """Any `entity_type` (a kio entity class), every field drawn."""
        fields = {
            field.name: self.field(entity_type, field, depth)
            for field in dataclasses.fields(entity_type)
        }
        return st.builds(entity_type, **fields)

    def field(
        self, owner: type[Any], field: dataclasses.Field[Any], depth: int
    ) -> st.SearchStrategy[Any]:
        kind = classify_field(field)
        if isinstance(kind, EntityField | EntityTupleField):
            value = self.entity(kind.type_, depth + 1)
        else:
            assert isinstance(kind, PrimitiveField | PrimitiveTupleField)
            value = self.primitive(kind.type_, field.metadata["kafka_type"], owner, field.name)
        if kind.is_array:
            value = self.arrays(value, depth)
        # A tagged field is optional by its absence; kio writes None as the default there.
        if is_optional(field) and get_field_tag(field) is None:
            value = st.one_of(st.none(), value)
        return value

    def arrays(self, items: st.SearchStrategy[Any], depth: int) -> st.SearchStrategy[Any]:
        """Tame: 1 or 2 items. Hostile: 0 to ARRAY_ITEMS_MAX items; at the top of a request,
        sometimes all repeated (up to ARRAY_REPEAT_MAX times): long arrays, duplicate names."""
        if self.tame:
            return st.lists(items, min_size=1, max_size=2).map(tuple)
        drawn = st.lists(items, max_size=ARRAY_ITEMS_MAX)
        times = st.sampled_from((1, 1, 1, ARRAY_REPEAT_MAX) if depth == 0 else (1,))
        return st.tuples(drawn, times).map(lambda pair: tuple(pair[0] * pair[1]))

    def primitive(
        self, value_type: type[Any], kafka_type: str, owner: type[Any], field_name: str
    ) -> st.SearchStrategy[Any]:
        if kafka_type == "string":
            strings = self.strings(value_type)
            return strings if owner.__flexible__ else strings.filter(_fits_legacy)
        if kafka_type == "records":
            return valid_batches() if self.tame else st.one_of(valid_batches(), any_records)
        if kafka_type == "bytes":
            big = st.just(b"\x00" * BIG_BYTES)
            small = st.binary(max_size=BYTES_MAX)
            return small if self.tame else st.one_of(small, big)
        if kafka_type == "bool":
            return st.booleans()
        if kafka_type == "uuid":
            # (no zero id: it is how null is written, and reads back as None)
            known = st.sampled_from(self.vocabulary.topic_ids)
            return known if self.tame else st.one_of(known, st.uuids())
        if kafka_type == "timedelta_i32":
            waits = (*WAITS_MS, SESSION_TIMEOUT_MS) if "session" in field_name else WAITS_MS
            return st.sampled_from(waits).map(
                lambda ms: i32Timedelta.parse(datetime.timedelta(milliseconds=ms))
            )
        if kafka_type == "timedelta_i64":
            return st.sampled_from(TIMEDELTA_I64_MS).map(
                lambda ms: i64Timedelta.parse(datetime.timedelta(milliseconds=ms))
            )
        if issubclass(value_type, Interval):
            return self.integers(value_type, field_name)
        raise AssertionError(f"no strategy for {owner.__name__}: {kafka_type} ({value_type})")

    def strings(self, value_type: type[Any]) -> st.SearchStrategy[str]:
        if value_type is TopicName:
            known = st.sampled_from(self.vocabulary.topics)
        elif value_type is GroupId:
            known = st.sampled_from(self.vocabulary.groups)
        elif value_type is TransactionalId:
            known = st.just("txn")
        else:
            known = st.sampled_from(TAME_TEXT)
        if self.tame:
            return known
        huge = st.just("z" * LEGACY_STRING_BYTES_MAX)
        return st.one_of(known, known, nasty_texts, huge)

    def integers(self, value_type: type[Interval], field_name: str) -> st.SearchStrategy[int]:
        if field_name in ACCEPTED:
            usual = st.sampled_from(ACCEPTED[field_name])
        elif value_type is ProducerId:
            usual = st.sampled_from((-1, 0, 1000))
        else:  # partition indexes, broker ids, versions, flags that exist
            usual = st.integers(-1, 4)
        if self.tame:
            return usual
        low, high = value_type.__low__, value_type.__high__
        edges = {v for v in (*INT64_EDGES, low, high, low + 1, high - 1) if low <= v <= high}
        return st.one_of(usual, usual, st.sampled_from(sorted(edges)), st.integers(low, high))


def _fits_legacy(text: str | None) -> bool:
    return text is None or len(text.encode()) <= LEGACY_STRING_BYTES_MAX
