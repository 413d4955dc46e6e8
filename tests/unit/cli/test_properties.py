"""Kafka's "key=value" producer properties as Producer keywords, as `pykraft produce
--producer-property` and `pykraft perf produce --producer-prop` take them."""

from __future__ import annotations

import re

import pytest

from pykraft.cli.properties import producer_kwargs, split_properties


def producer_props(items: list[str]) -> dict[str, object]:
    return producer_kwargs(split_properties(items))


def test_producer_props_map_kafka_names_onto_producer_kwargs() -> None:
    props = producer_props(["linger.ms=20", "batch.size=65536", "compression.type=lz4"])
    assert props == {"linger_ms": 20, "batch_size": 65536, "compression_type": "lz4"}
    assert producer_props(["acks=1"]) == {"acks": "1"}


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("fetch.min.bytes=1", "unknown producer property 'fetch.min.bytes'"),
        ("linger.ms", "expected key=value"),
        ("linger.ms=soon", "linger.ms must be an integer"),
    ],
)
def test_bad_producer_props_say_what_is_wrong(item: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        producer_props([item])
