"""Byte-level fuzzing of the Kafka listener's framing (issue 14): what a connection carries after
a valid request, and what the listener must do with it.

Each `Case` is the bytes sent after a valid Metadata request on a fresh connection, the stream
then ended by the client, and what must follow the Metadata answer:

- CLOSED: nothing; the listener closes (a truncated frame, a size that is negative or above
  socket.request.max.bytes, an API key it does not serve, a version it does not serve of any API
  but ApiVersions: Kafka closes the connection for each).
- ANSWERED: the answers of `then` (ApiVersions with a version it does not know gets
  UNSUPPORTED_VERSION in the v0 body; a null, NUL-laden or not UTF-8 client id and unknown
  tagged fields still make a request), in order.
- EITHER: the listener may answer what it could read (each answer must then be well formed for
  the key, version and correlation id the frame's header names) and must close at the end.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from dataclasses import dataclass
from typing import Final

from hypothesis import strategies as st
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest

from pykraft.broker.kafka.apis.api_versions import API_VERSIONS_KEY, VERSION_MAX
from pykraft.broker.kafka.codec import SIZE, decode_response, peek_api
from pykraft.broker.kafka.server import REQUEST_BYTES_MAX

from .answers import answer_problems
from .requests import KafkaRequest, Vocabulary, requests, some_unknown_tags, unknown_tags
from .wire import Connection, probe

GARBAGE_BYTES_MAX: Final = 64
CLIENT_IDS: Final = (None, b"", b"\x00", b"a\x00b", b"\x00" * 300, b"caf\xe9", b"\xff\xfe\xfd")
_HEADER_V1: Final = struct.Struct(">hhi")  # key, version, correlation id; then the client id
_CORRELATION_AT: Final = 4


class Expect(enum.Enum):
    CLOSED = "closed"
    ANSWERED = "answered"
    EITHER = "either"


@dataclass(frozen=True)
class Case:
    kind: str
    data: bytes
    expect: Expect
    then: tuple[tuple[int, int], ...] = ()  # (correlation id, ApiVersions version) answered


def first_request() -> KafkaRequest:
    """The valid request every case follows: its answer must come first, whatever follows."""
    body = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    return KafkaRequest(body, 7, "fuzz")


def _frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload


def _header_v1(key: int, version: int, correlation_id: int, client_id: bytes | None) -> bytes:
    header = _HEADER_V1.pack(key, version, correlation_id)
    if client_id is None:
        return header + struct.pack(">h", -1)
    return header + struct.pack(">h", len(client_id)) + client_id


@st.composite
def cases(draw: st.DrawFn, served: dict[int, tuple[int, int]], vocabulary: Vocabulary) -> Case:
    """Any Case; `served` maps each API key the listener serves to its (min, max) version."""
    kind = draw(st.sampled_from(sorted(_KINDS)))
    return _KINDS[kind](draw, served, vocabulary)


def _valid(draw: st.DrawFn, served: dict[int, tuple[int, int]], vocabulary: Vocabulary) -> bytes:
    key = draw(st.sampled_from(sorted(served)))
    version = draw(st.integers(*served[key]))
    request: KafkaRequest = draw(requests(key, version, vocabulary))
    return request.frame()


def _truncated(draw: st.DrawFn, served: dict[int, tuple[int, int]], vocab: Vocabulary) -> Case:
    frame = _valid(draw, served, vocab)
    return Case("truncated", frame[: draw(st.integers(1, len(frame) - 1))], Expect.CLOSED)


def _size_larger(draw: st.DrawFn, served: dict[int, tuple[int, int]], vocab: Vocabulary) -> Case:
    """The size counts more than the request: garbage after it inside the frame, or nothing."""
    frame = _valid(draw, served, vocab)
    extra = draw(st.binary(max_size=GARBAGE_BYTES_MAX))
    lie = len(extra) + draw(st.integers(0, 1) if extra else st.just(1))
    data = SIZE.pack(len(frame) - SIZE.size + lie) + frame[SIZE.size :] + extra
    return Case("size-larger", data, Expect.EITHER if lie == len(extra) else Expect.CLOSED)


def _size_smaller(draw: st.DrawFn, served: dict[int, tuple[int, int]], vocab: Vocabulary) -> Case:
    frame = _valid(draw, served, vocab)
    lie = draw(st.integers(1, len(frame) - SIZE.size))
    return Case("size-smaller", SIZE.pack(len(frame) - SIZE.size - lie) + frame[4:], Expect.EITHER)


def _bad_size(draw: st.DrawFn, served: dict[int, tuple[int, int]], vocab: Vocabulary) -> Case:
    """A size prefix alone: negative, or above socket.request.max.bytes (the listener must not
    wait for such a body)."""
    size = draw(
        st.one_of(
            st.integers(-(2**31), -1),
            st.integers(REQUEST_BYTES_MAX + 1, 2**31 - 1),
            st.just(REQUEST_BYTES_MAX + 1),
        )
    )
    return Case("size-refused", SIZE.pack(size), Expect.CLOSED)


def _unknown_key(draw: st.DrawFn, served: dict[int, tuple[int, int]], vocab: Vocabulary) -> Case:
    key = draw(st.integers(-(2**15), 2**15 - 1).filter(lambda k: k not in served))
    version, correlation_id = draw(st.integers(-(2**15), 2**15 - 1)), draw(st.integers(0, 99))
    body = draw(st.binary(max_size=GARBAGE_BYTES_MAX))
    data = _frame(_header_v1(key, version, correlation_id, b"fuzz") + body)
    return Case("unknown-api-key", data, Expect.CLOSED)


def _unserved_version(
    draw: st.DrawFn, served: dict[int, tuple[int, int]], vocab: Vocabulary
) -> Case:
    """A version outside a served API's range: ApiVersions answers (v0 body), others close."""
    key = draw(st.sampled_from(sorted(served)))
    low, high = served[key]
    version = draw(st.one_of(st.integers(-(2**15), low - 1), st.integers(high + 1, 2**15 - 1)))
    correlation_id = draw(st.integers(0, 2**31 - 1))
    header = _header_v1(key, version, correlation_id, b"fuzz")
    if key == API_VERSIONS_KEY and version > VERSION_MAX:
        header += b"\x00"  # a v2 header's empty tagged fields: flexible from v3
    data = _frame(header + draw(st.binary(max_size=GARBAGE_BYTES_MAX)))
    if key != API_VERSIONS_KEY:
        return Case("unsupported-version", data, Expect.CLOSED)
    return Case("unsupported-api-versions", data, Expect.ANSWERED, ((correlation_id, -1),))


def _client_ids(draw: st.DrawFn, served: dict[int, tuple[int, int]], vocab: Vocabulary) -> Case:
    """ApiVersions v0-2 (header v1) with a null, empty, NUL-laden or not UTF-8 client id (Kafka
    reads it with replacement characters), or one whose length says more than the frame holds."""
    version, correlation_id = draw(st.integers(0, 2)), draw(st.integers(0, 2**31 - 1))
    client_id = draw(st.sampled_from(CLIENT_IDS))
    header = _header_v1(API_VERSIONS_KEY, version, correlation_id, client_id)
    lie = draw(st.sampled_from((0, 0, 1, 100)))
    if lie and client_id is not None:
        lying = _HEADER_V1.pack(API_VERSIONS_KEY, version, correlation_id)
        lying += struct.pack(">h", len(client_id) + lie) + client_id
        return Case("client-id-length-lies", _frame(lying), Expect.CLOSED)
    return Case("client-id", _frame(header), Expect.ANSWERED, ((correlation_id, version),))


def _tagged(draw: st.DrawFn, served: dict[int, tuple[int, int]], vocab: Vocabulary) -> Case:
    """ApiVersions v3 with tagged fields no schema has, in its header and maybe its body."""
    correlation_id = draw(st.integers(0, 2**31 - 1))
    tagged = dataclasses.replace(
        probe(),
        correlation_id=correlation_id,
        header_tags=draw(some_unknown_tags()),
        body_tags=draw(unknown_tags()),
    )
    return Case("unknown-tagged-fields", tagged.frame(), Expect.ANSWERED, ((correlation_id, 3),))


def _garbage(draw: st.DrawFn, served: dict[int, tuple[int, int]], vocab: Vocabulary) -> Case:
    """A well-sized frame of random bytes, or random bytes with no framing at all."""
    payload = draw(st.binary(max_size=GARBAGE_BYTES_MAX))
    framed = draw(st.booleans())
    return Case("garbage", _frame(payload) if framed else payload, Expect.EITHER)


def _flipped(draw: st.DrawFn, served: dict[int, tuple[int, int]], vocab: Vocabulary) -> Case:
    """A valid frame with one byte after its size prefix changed."""
    data = bytearray(_valid(draw, served, vocab))
    position = draw(st.integers(SIZE.size, len(data) - 1))
    data[position] ^= draw(st.integers(1, 255))
    return Case("flipped-byte", bytes(data), Expect.EITHER)


_KINDS = {
    "truncated": _truncated,
    "size-larger": _size_larger,
    "size-smaller": _size_smaller,
    "size-refused": _bad_size,
    "unknown-api-key": _unknown_key,
    "unserved-version": _unserved_version,
    "client-id": _client_ids,
    "unknown-tagged-fields": _tagged,
    "garbage": _garbage,
    "flipped-byte": _flipped,
}


def check_case(connection: Connection, case: Case) -> None:
    """Sends the first request and `case`, ends the stream, and checks what comes back."""
    first = first_request()
    connection.send(first.frame() + case.data)
    connection.finish_sending()
    answers = connection.answers_until_closed()
    assert answers, "the valid request before the bad bytes was not answered"
    found = answer_problems(first.api, first.correlation_id, answers[0])
    assert not found, found
    later = answers[1:]
    if case.expect is Expect.CLOSED:
        assert not later, f"{case.kind}: answered {len(later)} frames, then closed"
    elif case.expect is Expect.ANSWERED:
        assert len(later) == len(case.then), f"{case.kind}: {len(later)} answers"
        for payload, (correlation_id, version) in zip(later, case.then, strict=True):
            _check_api_versions(payload, correlation_id, version)
    else:
        _check_any(case, later)


def _check_api_versions(payload: bytes, correlation_id: int, version: int) -> None:
    """ApiVersions' answer: `version` -1 is the v0 body with UNSUPPORTED_VERSION."""
    if version < 0:
        answered, body = decode_response(payload, ApiVersionsResponseV0)
        assert body.error_code is ErrorCode.unsupported_version, body
        assert answered == correlation_id
        return
    found = answer_problems((API_VERSIONS_KEY, version), correlation_id, payload)
    assert not found, found


def _check_any(case: Case, answers: list[bytes]) -> None:
    """Answers to frames whose header the case cannot predict: each must be well formed for
    the first frame's key, version and correlation id (random frames after it rarely parse);
    an ApiVersions version the listener does not serve is answered in the v0 body."""
    if not answers:
        return
    frame = case.data[SIZE.size :]
    key, version = peek_api(frame)
    (correlation_id,) = SIZE.unpack_from(frame, _CORRELATION_AT)
    if key == API_VERSIONS_KEY and not 0 <= version <= VERSION_MAX:
        _check_api_versions(answers[0], correlation_id, -1)
        return
    found = answer_problems((key, version), correlation_id, answers[0])
    assert not found, f"{case.kind}: {found}"
