"""Broker session streams (`BrokerSession`): fencing a broker as soon as its connection to the
active controller ends, instead of one session timeout after its last heartbeat.

A killed broker's sockets close at once, so the end of its stream is the earliest sign that it
is gone. A paused or cut-off broker keeps its connection open (or its end never arrives), and
only the session timeout fences it (`HeartbeatTracker.expired`). Both decisions are pure: the
driver turns a stream opening and ending into writes that call these functions, so the fence goes
through the normal write path and applies only if this controller is still active when it commits.
"""

from __future__ import annotations

from pykraft.metadata_log.image import MetadataImage
from pykraft.proto import common_pb2, controller_pb2
from pykraft.quorum.controller.guards import check_broker_epoch
from pykraft.quorum.controller.heartbeats import HeartbeatTracker
from pykraft.quorum.controller.leaving import start_fences
from pykraft.quorum.controller.result import ControllerResult
from pykraft.server_common.errors import error_header, ok_header


def open_session(
    image: MetadataImage,
    request: controller_pb2.BrokerSessionRequest,
    sessions: HeartbeatTracker,
    stream_id: int,
) -> ControllerResult[controller_pb2.BrokerSessionResponse]:
    """Makes `stream_id` the current session stream of the requesting broker when it is
    registered with the epoch it names; the answer's header says whether it was taken."""
    error = check_broker_epoch(image, request.broker_id, request.broker_epoch)
    if error is None:
        sessions.open_stream(request.broker_id, stream_id)
    header = ok_header() if error is None else error_header(error)
    return ControllerResult((), controller_pb2.BrokerSessionResponse(header=header))


def end_session(
    image: MetadataImage,
    request: controller_pb2.BrokerSessionRequest,
    sessions: HeartbeatTracker,
    stream_id: int,
    next_offset: int,
) -> ControllerResult[common_pb2.ResponseHeader]:
    """Stream `stream_id` of the broker of `request` ended. When it was the broker's current
    stream and that incarnation is still registered and unfenced, starts fencing it (its
    leaderships move to live ISR members, step by step: `leaving.py`) and ends its session
    (`next_offset`: the offset of the first record returned); otherwise (a newer stream
    opened, another epoch registered, already fenced) writes nothing."""
    broker_id = request.broker_id
    if not sessions.end_stream(broker_id, stream_id):
        return ControllerResult((), ok_header())
    broker = image.cluster.broker(broker_id)
    if broker is None or broker.broker_epoch != request.broker_epoch or broker.fenced:
        return ControllerResult((), ok_header())
    records, _ = start_fences(image, [broker_id], sessions, next_offset)
    return ControllerResult(tuple(records), ok_header())
