"""ProducerConfig on its own: Kafka's defaults are valid, the derived fields are what the wire
and the batches use, and Kafka's idempotence rule resolves `enable_idempotence`. The Producer's
own tests (test_producer.py) check that the same errors reach a caller of `Producer(...)`."""

from __future__ import annotations

import pytest

from pykraft.client.producer.config import ProducerConfig
from pykraft.proto.record_batch import Compression


def test_kafka_defaults_are_valid_and_idempotent() -> None:
    config = ProducerConfig()
    assert (config.acks_id, config.compression, config.idempotent) == (-1, Compression.NONE, True)


@pytest.mark.parametrize(
    ("acks", "acks_id"), [("all", -1), (-1, -1), ("-1", -1), (0, 0), ("0", 0), (1, 1), ("1", 1)]
)
def test_acks_spellings_map_to_the_wire_value(acks: str | int, acks_id: int) -> None:
    assert ProducerConfig(acks=acks, enable_idempotence=False).acks_id == acks_id


def test_compression_type_names_map_to_the_batch_codec() -> None:
    assert ProducerConfig(compression_type="zstd").compression is Compression.ZSTD
    assert ProducerConfig(compression_type="none").compression is Compression.NONE


@pytest.mark.parametrize(
    "settings",
    [{"acks": 1}, {"retries": 0}, {"max_in_flight_requests_per_connection": 6}],
)
def test_idempotence_left_unset_turns_off_on_a_conflict(settings: dict[str, int]) -> None:
    assert not ProducerConfig(**settings).idempotent  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="enable_idempotence=True needs"):
        ProducerConfig(enable_idempotence=True, **settings)  # type: ignore[arg-type]


def test_bad_values_name_their_setting() -> None:
    with pytest.raises(ValueError, match="max_request_size must be an integer of at least 1"):
        ProducerConfig(max_request_size=0)
    with pytest.raises(ValueError, match="enable_idempotence must be a bool"):
        ProducerConfig(enable_idempotence="yes")  # type: ignore[arg-type]
