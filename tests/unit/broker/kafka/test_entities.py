"""Building kio entities and Kafka's values in them: one response built for every version, error
codes kio can always encode, timestamps exact to the millisecond on the wire, durations in whole
milliseconds."""

from __future__ import annotations

import datetime
import io
import struct

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v1 import response as v1
from kio.schema.list_offsets.v4 import response as v4
from kio.serial.writers import write_nullable_datetime_i64

from pykraft.broker.kafka.entities import build, field_or, millis, timestamp_or_none


def test_build_keeps_the_fields_the_version_has() -> None:
    values = {"partition_index": 3, "error_code": 0, "timestamp": -1, "offset": 7}
    old = build(v1.ListOffsetsPartitionResponse, leader_epoch=2, **values)
    new = build(v4.ListOffsetsPartitionResponse, leader_epoch=2, **values)
    assert not hasattr(old, "leader_epoch") and new.leader_epoch == 2
    assert field_or(old, "leader_epoch", -1) == -1 and field_or(new, "leader_epoch", -1) == 2


def test_build_answers_an_error_code_kio_does_not_know_as_unknown_server_error() -> None:
    """Not a ValueError from kio's enum, which would close the client's connection."""
    values = {"partition_index": 3, "timestamp": -1, "offset": -1, "leader_epoch": -1}
    known = build(v4.ListOffsetsPartitionResponse, error_code=6, **values)
    unknown = build(v4.ListOffsetsPartitionResponse, error_code=9_999, **values)
    assert known.error_code == ErrorCode.not_leader_or_follower
    assert unknown.error_code == ErrorCode.unknown_server_error


@pytest.mark.parametrize("timestamp_ms", [-1, 0, 1, 999, 1_700_000_000_123, 4_102_444_800_007])
def test_timestamps_reach_the_wire_exactly(timestamp_ms: int) -> None:
    buffer = io.BytesIO()
    write_nullable_datetime_i64(buffer, timestamp_or_none(timestamp_ms))
    assert struct.unpack(">q", buffer.getvalue()) == (timestamp_ms,)


def test_durations_are_whole_milliseconds() -> None:
    assert millis(datetime.timedelta(seconds=30)) == 30_000
    assert millis(datetime.timedelta(microseconds=1_999)) == 1
