"""Produce with damaged record batches through the dispatch layer, against a real
ReplicaManager's log (issue 14): every damaged batch is refused CORRUPT_MESSAGE or
INVALID_RECORD and stores nothing, and the valid produce and Fetch after it see only valid
records (`records.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import pytest

from .records import PRODUCE_KEY, Partition, fuzz_damaged_batches
from .requests import KafkaRequest
from .unit_world import SERVED, unit_world

EXAMPLES: Final = 60

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")


@pytest.fixture(scope="module")
def partition(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Partition]:
    """orders-0, led by this broker alone."""
    with unit_world(tmp_path_factory.mktemp("kafka-records")) as world:

        def send(request: KafkaRequest) -> bytes:
            payload = world.answer(request)
            assert payload is not None
            return payload

        yield Partition(send, "orders", 0)


def test_damaged_batches_are_refused_and_store_nothing(partition: Partition) -> None:
    fuzz_damaged_batches(partition, SERVED[PRODUCE_KEY], EXAMPLES, "dispatch")
