"""The payload of one Raft entry: an atomic batch of metadata records, stamped with who decided it.

Layout (big-endian): magic u8 (0x4B), version u8, kind u8, epoch i32, leader_id i32, then the
records as `metadata_log.codec.encode_records` writes them.

`epoch` is the Raft term in which the active controller decided the batch, and `leader_id` that
controller. A LEADER_CHANGE batch opens an epoch: the state machine applies a RECORDS batch only
when it carries the epoch and leader of the last LEADER_CHANGE applied, so a decision taken by a
deposed controller (pysyncobj may still deliver it) can never land on top of a newer controller's
state.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from pykraft.metadata_log.codec import decode_records, encode_records
from pykraft.metadata_log.records import Record

_HEADER = struct.Struct(">BBBii")
_MAGIC = 0x4B
_VERSION = 0
# The bytes a payload adds to its records' frames: the header and the record count's varint.
PAYLOAD_OVERHEAD_BYTES_MAX = _HEADER.size + 10


class BatchKind(IntEnum):
    RECORDS = 0
    LEADER_CHANGE = 1


class CorruptBatchError(ValueError):
    """The bytes of a Raft entry are not a quorum batch this version can read."""


@dataclass(frozen=True, slots=True)
class QuorumBatch:
    kind: BatchKind
    epoch: int
    leader_id: int
    records: tuple[Record, ...]

    def encode(self) -> bytes:
        return encode_payload(self.kind, self.epoch, self.leader_id, encode_records(self.records))

    @staticmethod
    def decode(payload: bytes) -> QuorumBatch:
        if len(payload) < _HEADER.size:
            raise CorruptBatchError(
                f"quorum batch of {len(payload)} bytes is shorter than its header"
            )
        magic, version, kind, epoch, leader_id = _HEADER.unpack_from(payload)
        if magic != _MAGIC or version != _VERSION:
            raise CorruptBatchError(f"unknown quorum batch magic {magic:#x} or version {version}")
        try:
            batch_kind = BatchKind(kind)
        except ValueError as error:
            raise CorruptBatchError(f"unknown quorum batch kind {kind}") from error
        records = tuple(decode_records(payload[_HEADER.size :]))
        return QuorumBatch(batch_kind, epoch, leader_id, records)


def encode_payload(kind: BatchKind, epoch: int, leader_id: int, record_batch: bytes) -> bytes:
    """The entry of a batch whose records `metadata_log.codec` already encoded as `record_batch`
    (what `QuorumBatch.encode` writes, without encoding the records again)."""
    return _HEADER.pack(_MAGIC, _VERSION, kind, epoch, leader_id) + record_batch


def record_batch_of(payload: bytes) -> bytes:
    """The records' encoding inside a payload `QuorumBatch.decode` accepted: what the metadata
    log serves, without encoding the records again."""
    return payload[_HEADER.size :]
