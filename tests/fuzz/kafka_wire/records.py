"""Produce with damaged record batches (issue 14): each must be refused CORRUPT_MESSAGE or
INVALID_RECORD and store nothing; the valid produce after it lands right at the log end it
found, and a Fetch from there returns that valid record alone.

Damage: what `messages.corrupt_batches` does (bit flips under the CRC, BatchLength lies,
truncation, bytes after the batch, header fields the records contradict with the CRC made
good again: count, last offset delta, codec, control bit), a magic other than 2, and for each
codec a batch whose compressed records are garbage (CRC good, so the broker must decompress to
find out). `Partition` is what the check needs of wherever the requests go (a dispatcher in
this process, or a broker's listener).
"""

from __future__ import annotations

import datetime
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import crc32c
from hypothesis import given
from hypothesis import strategies as st
from kio.index import load_payload_module, load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from pykraft.broker.kafka.codec import decode_response
from pykraft.proto.record_batch import Compression, build_batch, decode_batch, iter_batches

from ..messages import CRC_OFFSET, CRC_START, MAGIC_OFFSET, corrupt_batches, valid_batches
from .answers import SENT, answer_problems, fuzzing
from .requests import KafkaRequest

PRODUCE_KEY: Final = 0
FETCH_KEY: Final = 1
FETCH_VERSION: Final = 12
REFUSALS: Final = frozenset({ErrorCode.corrupt_message, ErrorCode.invalid_record})
_ATTRIBUTES_AT: Final = 21
_RECORDS_AT: Final = 61  # after the batch header
_TIMEOUT: Final = datetime.timedelta(seconds=5)
_FETCH_BYTES_MAX: Final = 1 << 20

# Sends a request, returns its answer's payload (the dispatcher's or a connection's).
Send = Callable[[KafkaRequest], bytes]


def _fix_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(bytes(batch[CRC_START:])))
    return bytes(batch)


@st.composite
def bad_magic(draw: st.DrawFn) -> bytes:
    batch = bytearray(draw(valid_batches()))
    batch[MAGIC_OFFSET] = draw(st.sampled_from((0, 1, 3, 0x7F, 0xFF)))
    return bytes(batch)


@st.composite
def compressed_garbage(draw: st.DrawFn) -> bytes:
    """A batch of any codec whose records section is random bytes or a compressed stream cut
    short, with the CRC made good."""
    codec = draw(st.sampled_from([c for c in Compression if c is not Compression.NONE]))
    records = [(0, None, draw(st.binary(min_size=1, max_size=200))) for _ in range(3)]
    batch = bytearray(build_batch(records, compression=codec))
    if draw(st.booleans()):
        garbage = draw(st.binary(min_size=1, max_size=120))
    else:
        garbage = bytes(batch[_RECORDS_AT : draw(st.integers(_RECORDS_AT, len(batch) - 1))])
    batch[_RECORDS_AT:] = garbage
    struct.pack_into(">i", batch, 8, len(batch) - 12)  # BatchLength: what follows it
    struct.pack_into(">h", batch, _ATTRIBUTES_AT, codec)
    return _fix_crc(batch)


damaged_batches = st.one_of(corrupt_batches(), bad_magic(), compressed_garbage())


@dataclass
class Partition:
    """One partition, where a leader answers `send`; `end` is its log end offset."""

    send: Send
    topic: str
    index: int
    end: int = -1
    sent: int = 0

    def produce(self, version: int, records: bytes) -> Any:
        """The partition's result in the Produce answer (acks=-1)."""
        types = load_payload_module(PRODUCE_KEY, version, EntityType.request)
        data = (types.PartitionProduceData(index=self.index, records=records),)
        body = types.ProduceRequest(
            acks=-1,
            timeout=_TIMEOUT,
            topic_data=(types.TopicProduceData(name=self.topic, partition_data=data),),
        )
        payload = self._answer(body)
        _, answer = decode_response(payload, load_response_schema(PRODUCE_KEY, version))
        [topic] = answer.responses
        [result] = topic.partition_responses
        return result

    def fetch_values(self, offset: int) -> tuple[int, list[bytes | None]]:
        """The high watermark and the values of the records from `offset` on."""
        types = load_payload_module(FETCH_KEY, FETCH_VERSION, EntityType.request)
        partition = types.FetchPartition(
            partition=self.index, fetch_offset=offset, partition_max_bytes=_FETCH_BYTES_MAX
        )
        body = types.FetchRequest(
            max_wait=datetime.timedelta(0),
            min_bytes=0,
            max_bytes=_FETCH_BYTES_MAX,
            topics=(types.FetchTopic(topic=self.topic, partitions=(partition,)),),
            forgotten_topics_data=(),
        )
        schema = load_response_schema(FETCH_KEY, FETCH_VERSION)
        _, answer = decode_response(self._answer(body), schema)
        [[result]] = [topic.partitions for topic in answer.responses]
        assert result.error_code is ErrorCode.none, result
        data = result.records or b""
        values = [
            r.value for position, _ in iter_batches(data) for r in decode_batch(data, position)
        ]
        return result.high_watermark, values

    def produce_marker(self, version: int) -> bytes:
        """A valid one-record batch with a value seen nowhere else; checks it landed at `end`
        (nothing was stored since) and moves `end` past it."""
        marker = b"valid-%d" % self.sent
        self.sent += 1
        now_ms = time.time_ns() // 1_000_000
        result = self.produce(version, build_batch([(now_ms, None, marker)]))
        assert result.error_code is ErrorCode.none, result
        if self.end >= 0:
            assert result.base_offset == self.end, (
                f"appended at {result.base_offset}, end {self.end}"
            )
        self.end = result.base_offset + 1
        return marker

    def _answer(self, body: Any) -> bytes:
        request = KafkaRequest(body, self.sent, "fuzz-records")
        payload = self.send(request)
        found = answer_problems(request.api, request.correlation_id, payload)
        assert not found, found
        return payload


def check_refused_then_valid(partition: Partition, version: int, damaged: bytes) -> None:
    """The damaged batch is refused and stores nothing; a valid one after it is stored at the
    end found before, and a Fetch from there returns that record alone."""
    if partition.end < 0:
        partition.produce_marker(version)
    result = partition.produce(version, damaged)
    assert result.error_code in REFUSALS, f"{result.error_code.name}: {result}"
    start = partition.end
    marker = partition.produce_marker(version)
    high_watermark, values = partition.fetch_values(start)
    assert (high_watermark, values) == (start + 1, [marker])


def fuzz_damaged_batches(
    partition: Partition, produce_versions: tuple[int, int], examples: int, where: str
) -> None:
    """`check_refused_then_valid` for `examples` damaged batches, any Produce version of
    `produce_versions` (min, max)."""

    @fuzzing(examples)
    @given(version=st.integers(*produce_versions), damaged=damaged_batches)
    def produce(version: int, damaged: bytes) -> None:
        SENT[f"damaged batch, Produce v{version} @{where}"] += 1
        check_refused_then_valid(partition, version, damaged)

    produce()
