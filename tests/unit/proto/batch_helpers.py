"""Helpers shared by the record-batch tests: an independent CRC-32C and re-sealing of edited
batches (so a test can reach the record decoder past the CRC check)."""

from __future__ import annotations

import struct

import crc32c

CASTAGNOLI_REVERSED = 0x82F63B78


def crc32c_bitwise(data: bytes) -> int:
    """CRC-32C one bit at a time, independent of the `crc32c` package the codec uses."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (CASTAGNOLI_REVERSED if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def reseal(batch: bytes | bytearray) -> bytes:
    """The batch with BatchLength set to its actual size and a CRC that matches its bytes."""
    edited = bytearray(batch)
    struct.pack_into(">i", edited, 8, len(edited) - 12)
    # The crc32c package, which test_record_batch_reference checks against crc32c_bitwise.
    struct.pack_into(">I", edited, 17, crc32c.crc32c(bytes(edited[21:])))
    return bytes(edited)


def seal(fields: dict[str, int], payload: bytes) -> bytes:
    """A batch built field by field around any records payload, with a valid CRC."""
    values = {
        "base_offset": 0,
        "partition_leader_epoch": 0,
        "attributes": 0,
        "last_offset_delta": 0,
        "base_timestamp": 0,
        "max_timestamp": 0,
        "producer_id": -1,
        "producer_epoch": -1,
        "base_sequence": -1,
        "record_count": 1,
    }
    values.update(fields)
    head = struct.pack(
        ">qiibIhiqqqhii",
        values["base_offset"],
        0,  # BatchLength, set by reseal
        values["partition_leader_epoch"],
        2,
        0,  # CRC, set by reseal
        values["attributes"],
        values["last_offset_delta"],
        values["base_timestamp"],
        values["max_timestamp"],
        values["producer_id"],
        values["producer_epoch"],
        values["base_sequence"],
        values["record_count"],
    )
    return reseal(head + payload)
