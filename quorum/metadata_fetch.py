"""Builds `MetadataFetch` answers: the committed batches after an offset, or a snapshot first.

A broker that asks for records the controller no longer retains (older than the bounded tail, or
from before this controller's last restart) gets the whole image written out as records at the
current offset, and no batches: applying that snapshot brings it level with the log.
"""

from __future__ import annotations

from pykraft.metadata_log.codec import encode_records
from pykraft.proto import controller_pb2
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.state_machine import MetadataStateMachine


def fetch_response(
    state: MetadataStateMachine, after_offset: int, config: ControllerConfig
) -> controller_pb2.MetadataFetchResponse:
    response = controller_pb2.MetadataFetchResponse(high_watermark=state.last_offset)
    if after_offset >= state.last_offset:
        return response  # nothing new before the long poll ran out
    batches = state.batches_after(after_offset, bytes_max=config.metadata_fetch_bytes_max)
    if batches is None:
        image = state.image
        response.snapshot.offset = image.offset
        response.snapshot.epoch = image.epoch
        response.snapshot.records = encode_records(image.write())
        return response
    for batch in batches:
        response.batches.add(
            base_offset=batch.base_offset, epoch=batch.epoch, records=batch.records
        )
    return response
