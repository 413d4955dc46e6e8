"""What every answer to a fuzzed Kafka request must be, and the suite's seed and counts.

An answer is acceptable when it is the response of the request's API key and version, read
whole by kio (so every error code in it is one of Kafka's), with the request's correlation id;
no error in it is UNKNOWN_SERVER_ERROR (an exception the handler caught), and an error whose
entity has an `error_message` field carries a sentence there.

`PYKRAFT_SEED` replays a run (default `DEFAULT_SEED`); `PYKRAFT_KAFKA_FUZZ_EXAMPLES` scales the
examples of every test (the long campaign of `make kafka-fuzz`).
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, Final, TypeVar

from hypothesis import HealthCheck, Phase, seed, settings
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from pykraft.broker.kafka.dispatch import Dispatcher

DEFAULT_SEED: Final = 14
SEED: Final = int(os.environ.get("PYKRAFT_SEED", DEFAULT_SEED))
SCALE: Final = float(os.environ.get("PYKRAFT_KAFKA_FUZZ_EXAMPLES", "1"))

# Requests sent in this session, by "what@where" (an API and version, a kind of bad frame);
# printed at its end with the seed (conftest).
SENT: Counter[str] = Counter()

F = TypeVar("F", bound=Callable[..., Any])


def fuzzing(examples: int) -> Callable[[F], F]:
    """`examples` (times SCALE) examples from SEED, no per-example deadline, no database."""

    def configure(test: F) -> F:
        configured = settings(
            max_examples=max(1, round(examples * SCALE)),
            deadline=None,
            database=None,
            phases=(Phase.explicit, Phase.generate, Phase.shrink),
            suppress_health_check=list(HealthCheck),
        )(test)
        return seed(SEED)(configured)

    return configure


def served(dispatcher: Dispatcher) -> dict[int, tuple[int, int]]:
    """Each API key `dispatcher` serves (ApiVersions included): its (min, max) version."""
    return {key: (api.version_min, api.version_max) for key, api in dispatcher.table.items()}


def advertised_versions(table: dict[int, tuple[int, int]]) -> list[tuple[int, int]]:
    """Every (key, version) of `table`, in order."""
    return [(key, v) for key, (low, high) in sorted(table.items()) for v in range(low, high + 1)]


def api_name(key: int, version: int) -> str:
    return f"{load_response_schema(key, version).__name__.removesuffix('Response')} v{version}"


def answer_problems(api: tuple[int, int], correlation_id: int, payload: bytes) -> list[str]:
    """Why `payload` (a response frame without its size) is not an acceptable answer to a
    request of `api` (key, version) with `correlation_id` (empty: it is)."""
    schema = load_response_schema(*api)
    try:
        header, offset = entity_reader(schema.__header_schema__)(payload, 0)
        body, size = entity_reader(schema)(payload, offset)
    except Exception as error:  # kio raises several types for bytes it cannot read
        return [f"an unreadable {schema.__name__}: {error!r}"]
    found = []
    if offset + size != len(payload):
        found.append(f"{len(payload) - offset - size} bytes after the {schema.__name__}")
    if header.correlation_id != correlation_id:
        found.append(f"correlation id {header.correlation_id}, sent {correlation_id}")
    for path, entity in _with_errors(body, schema.__name__):
        code = entity.error_code
        if code is ErrorCode.unknown_server_error:
            found.append(f"UNKNOWN_SERVER_ERROR at {path}: {entity}")
        elif (
            code is not ErrorCode.none
            and hasattr(entity, "error_message")
            and not entity.error_message
        ):
            found.append(f"{code.name} without a sentence at {path}")
    return found


def _with_errors(entity: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every entity in the tree that has an error_code, with where it is."""
    if hasattr(entity, "error_code"):
        yield path, entity
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        items = value if isinstance(value, tuple) else (value,)
        for index, item in enumerate(items):
            if dataclasses.is_dataclass(item):
                yield from _with_errors(item, f"{path}.{field.name}[{index}]")
