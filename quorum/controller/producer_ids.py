"""Producer id blocks for idempotent and transactional producers (Kafka's ProducerIdControlManager).

Each request hands the broker the next block of `PRODUCER_ID_BLOCK_SIZE` ids; the
ProducerIdsRecord moves the image's next id past it, so no id is ever handed out twice, even
across controller failovers.
"""

from __future__ import annotations

from typing import Final

from pykraft.metadata_log.image import MetadataImage
from pykraft.metadata_log.records import ProducerIdsRecord
from pykraft.proto import common_pb2, controller_pb2
from pykraft.quorum.controller.guards import check_broker_epoch
from pykraft.quorum.controller.result import ControllerResult
from pykraft.server_common.errors import ApiError, error_header, ok_header

PRODUCER_ID_BLOCK_SIZE: Final = 1000
PRODUCER_ID_MAX: Final = (1 << 63) - 1


def allocate_producer_ids(
    image: MetadataImage, request: controller_pb2.AllocateProducerIdsRequest
) -> ControllerResult[controller_pb2.AllocateProducerIdsResponse]:
    """The next block for a broker registered with the request's epoch."""
    error = check_broker_epoch(image, request.broker_id, request.broker_epoch)
    start = image.producer_ids.next_producer_id
    if error is None and start > PRODUCER_ID_MAX - PRODUCER_ID_BLOCK_SIZE:
        error = ApiError(common_pb2.UNKNOWN_SERVER_ERROR, "Every 64-bit producer id is used up.")
    if error is not None:
        response = controller_pb2.AllocateProducerIdsResponse(header=error_header(error))
        return ControllerResult((), response)
    record = ProducerIdsRecord(
        request.broker_id, request.broker_epoch, next_producer_id=start + PRODUCER_ID_BLOCK_SIZE
    )
    response = controller_pb2.AllocateProducerIdsResponse(
        header=ok_header(), producer_id_start=start, producer_id_len=PRODUCER_ID_BLOCK_SIZE
    )
    return ControllerResult((record,), response)
