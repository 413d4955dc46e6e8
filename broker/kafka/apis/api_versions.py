"""ApiVersions (key 18): which API keys and versions this listener serves.

The table comes from the listener's own list of Apis, so it never claims an API the listener
cannot route. A client may ask with a version this broker does not know (librdkafka starts at
v3, kafka-python 2.3 at v4); as Kafka does, it gets UNSUPPORTED_VERSION (35) and the table in
the v0 body, behind a v0 response header, and steps down.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from kio.schema.api_versions.v0 import response as v0
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16

from pykraft.broker.kafka.api import Api, RequestContext
from pykraft.broker.kafka.entities import NO_THROTTLE, response_module

API_VERSIONS_KEY: Final = 18
VERSION_MIN: Final = 0
VERSION_MAX: Final = 3

Ranges = tuple[tuple[int, int, int], ...]  # (key, min, max), by key


def _ranges(apis: Sequence[Api]) -> Ranges:
    own = (API_VERSIONS_KEY, VERSION_MIN, VERSION_MAX)
    return tuple(sorted({own, *((a.key, a.version_min, a.version_max) for a in apis)}))


def _body(version: int, error: ErrorCode, ranges: Ranges) -> Any:
    module = response_module(API_VERSIONS_KEY, version)
    keys = tuple(
        module.ApiVersion(api_key=i16(key), min_version=i16(low), max_version=i16(high))
        for key, low, high in ranges
    )
    if version == 0:
        return module.ApiVersionsResponse(error_code=error, api_keys=keys)
    return module.ApiVersionsResponse(error_code=error, api_keys=keys, throttle_time=NO_THROTTLE)


def api_versions_api(apis: Sequence[Api]) -> Api:
    """The ApiVersions Api of a listener serving `apis` (ApiVersions itself included)."""
    ranges = _ranges(apis)

    def handle(ctx: RequestContext, request: Any) -> Any:
        return _body(ctx.api_version, ErrorCode.none, ranges)

    return Api(API_VERSIONS_KEY, VERSION_MIN, VERSION_MAX, handle)


def unsupported_version_response(apis: Sequence[Api]) -> v0.ApiVersionsResponse:
    """Kafka's answer to an ApiVersions version it does not serve: the v0 body, error 35."""
    body: v0.ApiVersionsResponse = _body(0, ErrorCode.unsupported_version, _ranges(apis))
    return body
