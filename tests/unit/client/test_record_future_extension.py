"""The compiled record future (`_record_future.pyx`) against the class's own constructor, which
accumulator.py uses without the extension: the same FutureRecordMetadata, resolving to the same
metadata or error, running the same callbacks, but untracked by the garbage collector."""

from __future__ import annotations

import functools
import gc

from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.client.errors import KafkaError, NotLeaderOrFollowerError
from pykraft.client.producer.future import BatchResult, FutureRecordMetadata
from pykraft.client.types import RecordMetadata, TopicPartition
from pykraft.proto import extensions

_record_future = extensions.compiled("pykraft.client.producer._record_future")

outcomes = st.one_of(
    st.tuples(st.integers(0, 1 << 62), st.sampled_from([-1, 0, 1 << 40]), st.none()),
    st.tuples(st.just(-1), st.just(-1), st.just(NotLeaderOrFollowerError("moved"))),
)


def _outcome(future: FutureRecordMetadata) -> RecordMetadata | BaseException:
    try:
        return future.result(timeout=0)
    except KafkaError as error:
        return error


def _note(
    called: list[tuple[str, FutureRecordMetadata]], name: str, done: FutureRecordMetadata
) -> None:
    called.append((name, done))


@settings(max_examples=150, deadline=None)
@given(
    outcome=outcomes,
    indices=st.lists(st.integers(0, 1 << 20), min_size=1, max_size=10),
    timestamp_ms=st.integers(-1, 1 << 45),
    topic=st.text(max_size=10),
    partition=st.integers(0, 1 << 31),
)
def test_both_resolve_alike_and_only_the_compiled_one_is_untracked(
    outcome: tuple[int, int, BaseException | None],
    indices: list[int],
    timestamp_ms: int,
    topic: str,
    partition: int,
) -> None:
    result, tp = BatchResult(), TopicPartition(topic, partition)
    compiled = [_record_future.record_future(result, tp, i, timestamp_ms) for i in indices]
    pure = [FutureRecordMetadata(result, tp, i, timestamp_ms) for i in indices]
    assert all(type(f) is FutureRecordMetadata and not gc.is_tracked(f) for f in compiled)
    assert all(gc.is_tracked(f) for f in pure)
    called: list[tuple[str, FutureRecordMetadata]] = []
    for name, futures in (("compiled", compiled), ("pure", pure)):
        for future in futures:
            future.add_done_callback(functools.partial(_note, called, name))
    assert not any(f.done() for f in compiled + pure)
    gc.collect()  # an untracked future keeps its references through a collection
    result.set(*outcome)
    assert [_outcome(f) for f in compiled] == [_outcome(f) for f in pure]
    assert [f for name, f in called if name == "compiled"] == compiled
    assert [f for name, f in called if name == "pure"] == pure
    if outcome[2] is None:
        first = compiled[0].result(timeout=0)
        assert first.offset == outcome[0] + indices[0]
        assert first.timestamp == (outcome[1] if outcome[1] >= 0 else timestamp_ms)
        assert (first.topic, first.partition) == (topic, partition)
