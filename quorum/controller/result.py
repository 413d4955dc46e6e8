"""What every decision of the controller returns, and the bound on how much one decision may write.

A decision is a pure function of the current `MetadataImage` and a request: it returns the records
to append to the metadata log and the response to send once they are committed. Nothing is
mutated; replaying `records` in order onto the image the decision saw yields the state the
response describes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from google.protobuf.message import Message

from pykraft.metadata_log.records import Record
from pykraft.proto import common_pb2
from pykraft.server_common.errors import ApiError, error_header, fill_error

T_co = TypeVar("T_co", covariant=True)
M = TypeVar("M", bound=Message)

# Kafka's MAX_RECORDS_PER_USER_OP: one user operation is one batch in the log, and a batch has a
# ceiling so that no request can stall the controller or bloat a single log entry.
RECORDS_PER_OPERATION_MAX: Final = 10_000


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[T_co]):
    """Records to append (in order, atomically) and the response to send after they commit."""

    records: tuple[Record, ...]
    response: T_co


class OperationTooLarge(ApiError):
    """An operation would write more records than `RECORDS_PER_OPERATION_MAX`; it fails whole,
    with POLICY_VIOLATION (Kafka's answer to an over-long record list)."""

    def __init__(self, records_wanted: int, records_max: int) -> None:
        super().__init__(
            common_pb2.POLICY_VIOLATION,
            f"Unable to perform excessively large batch operation: it needs {records_wanted} "
            f"records, more than the limit of {records_max} per operation.",
        )


class RecordBuffer:
    """The records of one operation, bounded: adding past the limit raises `OperationTooLarge`.

    `reserve` lets a caller check a cost before doing the work (placing a million partitions),
    so an oversized request is refused cheaply.
    """

    def __init__(self, records_max: int = RECORDS_PER_OPERATION_MAX) -> None:
        assert records_max > 0
        self._records_max = records_max
        self._records: list[Record] = []

    def reserve(self, count: int) -> None:
        """Raises unless `count` more records still fit."""
        wanted = len(self._records) + count
        if wanted > self._records_max:
            raise OperationTooLarge(wanted, self._records_max)

    def extend(self, records: Iterable[Record]) -> None:
        batch = list(records)
        self.reserve(len(batch))
        self._records.extend(batch)

    def freeze(self) -> tuple[Record, ...]:
        return tuple(self._records)


def refused_whole(
    response_cls: type[M], error: ApiError, items_field: str, item_keys: Iterable[Mapping[str, Any]]
) -> M:
    """A response failing the whole request: `error` in the header and in every item.

    `items_field` names the repeated field of per-item results; each of `item_keys` gives the
    fields that identify one item (its name, type...), in request order.
    """
    response = response_cls(header=error_header(error))
    items = getattr(response, items_field)
    for key in item_keys:
        fill_error(items.add(**key), error)
    return response
