"""Which handler answers a request frame, and the bytes of its answer.

`decode` runs on the listener's event loop and decides whether a frame is served at all: like
Kafka, an unknown API key, an unsupported version (of any API but ApiVersions) or unreadable bytes
raise FrameError, and the listener closes the connection. An ApiVersions version this broker does
not know, above or below its range, is answered without reading its body (UNSUPPORTED_VERSION
with the ranges, v0 body), as Kafka does for any version it does not support.
`answer` runs on a worker thread: the handler may block. A Fetch is answered zero copy: its
records stay in the segment files as ranges (`fetch_frame`) for the listener's sendfile.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pykraft.broker.kafka.api import Api, KafkaServices, RequestContext
from pykraft.broker.kafka.apis import fetch
from pykraft.broker.kafka.apis.api_versions import (
    API_VERSIONS_KEY,
    api_versions_api,
    unsupported_version_response,
)
from pykraft.broker.kafka.codec import (
    FrameError,
    RequestHeader,
    decode_header,
    decode_request,
    encode_response,
    peek_api,
)
from pykraft.broker.kafka.fetch_frame import FetchFrame, encode_fetch_response
from pykraft.server_common.request_metrics import observe_request

# ApiVersions is flexible from v3: a version above ours still carries a v2 request header.
_API_VERSIONS_FLEXIBLE_MIN = 3


@dataclass(frozen=True)
class Call:
    """A decoded request: its header, the Api that answers it (None: `body` is the answer)."""

    header: RequestHeader
    api: Api | None
    body: Any


class Dispatcher:
    """The listener's table: `apis` plus the ApiVersions that lists them."""

    def __init__(self, apis: Sequence[Api], *, zero_copy: bool = True) -> None:
        """With `zero_copy`, a Fetch served by `apis.fetch.handle` is answered as a FetchFrame
        whose records are file ranges, for the listener to send with sendfile."""
        served = (*apis, api_versions_api(apis))
        self._zero_copy = zero_copy
        self.table = {api.key: api for api in served}
        assert len(self.table) == len(served), "two Apis for one key"
        self._unsupported_versions = unsupported_version_response(served)

    def decode(self, frame: bytes | memoryview) -> Call:
        """The call a frame asks for; FrameError when Kafka would close the connection."""
        key, version = peek_api(frame)
        api = self.table.get(key)
        if api is None:
            raise FrameError(f"unknown API key {key}")
        if not api.version_min <= version <= api.version_max:
            if key != API_VERSIONS_KEY:
                raise FrameError(f"API key {key} version {version} is not supported")
            flexible = version >= _API_VERSIONS_FLEXIBLE_MIN
            header, _ = decode_header(frame, flexible=flexible)
            return Call(header, None, self._unsupported_versions)
        header, body = decode_request(frame)
        return Call(header, api, body)

    def answer(
        self, call: Call, services: KafkaServices, client_host: str
    ) -> bytes | FetchFrame | None:
        """The response frame (a FetchFrame for a zero-copy Fetch, which the caller closes);
        None when the handler answers nothing (Produce with acks=0). Exceptions from the
        handler propagate: the listener closes the connection. Each call is counted and timed
        under Kafka's API name (`request_metrics`)."""
        started = time.perf_counter()
        failed = True
        try:
            answer = self._answer(call, services, client_host)
            failed = False
            return answer
        finally:
            name = type(call.body).__name__.removesuffix("Request").removesuffix("Response")
            observe_request(name, "kafka", time.perf_counter() - started, failed=failed)

    def _answer(
        self, call: Call, services: KafkaServices, client_host: str
    ) -> bytes | FetchFrame | None:
        header = call.header
        if call.api is None:
            body = call.body
        else:
            ctx = RequestContext(services, header.api_version, header.client_id, client_host)
            if self._zero_copy and call.api.handle is fetch.handle:
                body = fetch.handle_with_ranges(ctx, call.body)
                return encode_fetch_response(header.api_version, header.correlation_id, body)
            body = call.api.handle(ctx, call.body)
            if body is None:
                return None
        return encode_response(header.correlation_id, body)
