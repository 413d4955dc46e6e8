"""`MetadataFetch` answers: what to send is chosen on the controller thread (`plan_fetch`), the
bytes are made on the caller's gRPC thread (`fetch_messages`), in messages of bounded size.

A broker that asks for records the controller no longer retains (older than the bounded tail, or
from before this controller's last restart) gets the whole image written out as records at the
current offset, and no batches: applying that snapshot brings it level with the log. Otherwise it
gets the committed batches after its offset, up to the limit (at least one batch).

Every message of the stream is at most `bytes_max` bytes (the request's `max_bytes`, capped by
`metadata.fetch.bytes.max`), unless one record alone is larger: the snapshot is encoded chunk by
chunk from the immutable image while the controller thread goes on, and a committed batch
larger than the limit is cut at record boundaries. No answer is ever built whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from pykraft.metadata_log import MetadataImage, encode_chunks, split_batch
from pykraft.proto import controller_pb2
from pykraft.quorum.config import METADATA_FETCH_BYTES_MIN, ControllerConfig
from pykraft.quorum.state_machine import CommittedBatch, MetadataStateMachine

# What a message spends besides its records: the answer's high watermark and the snapshot's
# offset, epoch and flag (varints of at most 10 bytes and their tags) and the length prefixes.
RESPONSE_FRAME_BYTES_MAX: Final = 64
# What one more MetadataBatch spends besides its records: tag, length, base offset, epoch.
BATCH_FRAME_BYTES_MAX: Final = 40


@dataclass(frozen=True, slots=True)
class FetchPlan:
    """The answer to one fetch, as the controller thread chose it: the image to send as a
    snapshot (immutable, so another thread may encode it) or the batches after the offset."""

    high_watermark: int
    snapshot: MetadataImage | None
    batches: tuple[CommittedBatch, ...]


def plan_fetch(
    state: MetadataStateMachine, after_offset: int, config: ControllerConfig
) -> FetchPlan:
    """What to answer a fetch of the records after `after_offset`; costs no encoding."""
    if after_offset >= state.last_offset:
        return FetchPlan(state.last_offset, None, ())  # nothing new before the long poll ran out
    batches = state.batches_after(after_offset, bytes_max=config.metadata_fetch_bytes_max)
    if batches is None:
        return FetchPlan(state.last_offset, state.image, ())
    return FetchPlan(state.last_offset, None, tuple(batches))


def fetch_bytes_max(requested: int, config: ControllerConfig) -> int:
    """The message limit of one fetch: what the broker asked for (0: no wish), within
    [METADATA_FETCH_BYTES_MIN, metadata.fetch.bytes.max]."""
    wanted = requested if requested > 0 else config.metadata_fetch_bytes_max
    return max(METADATA_FETCH_BYTES_MIN, min(wanted, config.metadata_fetch_bytes_max))


def fetch_messages(
    plan: FetchPlan, bytes_max: int
) -> Iterator[controller_pb2.MetadataFetchResponse]:
    """The stream of answers `plan` stands for, each at most `bytes_max` bytes (see the module
    docstring), made one at a time as the caller draws them."""
    records_max = bytes_max - RESPONSE_FRAME_BYTES_MAX
    if plan.snapshot is not None:
        yield from _snapshot_messages(plan.high_watermark, plan.snapshot, records_max)
        return
    response = controller_pb2.MetadataFetchResponse(high_watermark=plan.high_watermark)
    size = 0
    for batch in plan.batches:
        for index, records in split_batch(batch.records, records_max - BATCH_FRAME_BYTES_MAX):
            if response.batches and size + len(records) + BATCH_FRAME_BYTES_MAX > records_max:
                yield response
                response = controller_pb2.MetadataFetchResponse(high_watermark=plan.high_watermark)
                size = 0
            response.batches.add(
                base_offset=batch.base_offset + index, epoch=batch.epoch, records=records
            )
            size += len(records) + BATCH_FRAME_BYTES_MAX
    yield response


def _snapshot_messages(
    high_watermark: int, image: MetadataImage, records_max: int
) -> Iterator[controller_pb2.MetadataFetchResponse]:
    chunks = encode_chunks(image.records(), records_max)
    chunk = next(chunks)  # there is always one, if only an empty batch
    for following in chunks:
        yield _snapshot_message(high_watermark, image, chunk, last_chunk=False)
        chunk = following
    yield _snapshot_message(high_watermark, image, chunk, last_chunk=True)


def _snapshot_message(
    high_watermark: int, image: MetadataImage, records: bytes, *, last_chunk: bool
) -> controller_pb2.MetadataFetchResponse:
    snapshot = controller_pb2.MetadataSnapshot(
        offset=image.offset, epoch=image.epoch, records=records, last_chunk=last_chunk
    )
    return controller_pb2.MetadataFetchResponse(high_watermark=high_watermark, snapshot=snapshot)
