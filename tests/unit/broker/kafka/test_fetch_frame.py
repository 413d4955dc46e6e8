"""The hand-written Fetch response frame against kio's encoder: byte for byte the same frame for
every version 4-12, with records as bytes and as file ranges (whose bytes are then not in the
framing parts but sent from the file)."""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from pykraft.broker.kafka.codec import decode_response, encode_response
from pykraft.broker.kafka.entities import build
from pykraft.broker.kafka.fetch_frame import encode_fetch_response
from pykraft.broker.log import FileRange
from pykraft.proto.record_batch import build_batch

VERSIONS = range(4, 13)
BATCHES = build_batch([(1, b"k", b"v" * 300)] * 3) + build_batch([(2, None, b"w")], base_offset=3)


def _response(version: int, records: list[Any]) -> Any:
    """Two topics, partitions with records (`records`: one per partition), an error, aborted
    transactions (read_committed) and, where the version has them, tagged fields."""
    types = load_payload_module(1, version, EntityType.response)

    def partition(index: int, data: Any, **fields: Any) -> Any:
        values: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "high_watermark": 4,
            "last_stable_offset": 4,
            "log_start_offset": 0,
            "aborted_transactions": (),
            "preferred_read_replica": -1,
        }
        values.update(fields)
        return build(types.PartitionData, partition_index=index, records=data, **values)

    orders = tuple(partition(i, data) for i, data in enumerate(records))
    failed = partition(
        7,
        None,
        error_code=ErrorCode.not_leader_or_follower,
        aborted_transactions=None,
        current_leader=getattr(types, "LeaderIdAndEpoch", dict)(leader_id=2, leader_epoch=5),
    )
    diverged = partition(
        8,
        b"",
        aborted_transactions=(build(types.AbortedTransaction, producer_id=9, first_offset=1),),
        diverging_epoch=getattr(types, "EpochEndOffset", dict)(epoch=3, end_offset=300),
    )
    return build(
        types.FetchResponse,
        throttle_time=datetime.timedelta(milliseconds=25),
        error_code=ErrorCode.none,
        session_id=0,
        responses=(
            build(types.FetchableTopicResponse, topic="orders", partitions=orders),
            build(types.FetchableTopicResponse, topic="ünïcode", partitions=(failed, diverged)),
        ),
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_records_as_bytes_encode_as_kio_does(version: int) -> None:
    response = _response(version, [BATCHES, b"", None, BATCHES[:100]])
    frame = encode_fetch_response(version, 77, response)
    expected = encode_response(77, response)
    assert frame.to_bytes() == expected
    assert frame.size_bytes == len(expected)
    assert not list(frame.ranges())
    assert decode_response(expected[4:], type(response)) == (77, response)


@pytest.mark.parametrize("version", VERSIONS)
def test_records_as_file_ranges_encode_as_kio_does(version: int, tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"x" * 10 + BATCHES)
    with path.open("rb") as file:
        ranges = [FileRange(os.dup(file.fileno()), 10, len(BATCHES)) for _ in range(2)]
    frame = encode_fetch_response(version, 78, _response(version, [ranges[0], None, ranges[1]]))
    try:
        expected = encode_response(78, _response(version, [BATCHES, None, BATCHES]))
        assert frame.to_bytes() == expected
        assert frame.size_bytes == len(expected)
        assert list(frame.ranges()) == ranges
        framing = b"".join(part for part in frame.parts if isinstance(part, bytes))
        assert len(framing) == len(expected) - 2 * len(BATCHES)
        assert BATCHES not in framing
    finally:
        frame.close()
    assert all(file_range.fd == -1 for file_range in ranges)
