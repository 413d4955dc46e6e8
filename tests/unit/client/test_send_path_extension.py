"""The compiled `Producer.send` path (`_open_batches.SendPath`) against its pure-Python twin
(`open_batches.SendPath`): sides made of each send path over each implementation of the open
batches (and the compiled one with a partitioner it does not know, which it must ask) take the
same random sends, drains and completions, and must answer alike at every step (the same
partition and index or the same error, the same sticky partitions) and send the same batches
byte for byte, whose records' delivery callbacks get the same metadata in the same order.
Keyed records (murmur2, computed in C by the compiled path), keyless ones (sticky, moving on when
a batch fills), chosen partitions in and out of range, unknown topics, headers, bad types and
callbacks are all drawn.

Both implementations run in every session, whatever PYKRAFT_NO_EXTENSIONS says (it only picks
which one producers use); `make codec-python` runs the producer's tests again on the twin.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.client.errors import KafkaError, UnknownTopicOrPartitionError
from pykraft.client.producer import accumulator, open_batches
from pykraft.client.producer.accumulator import ProducerBatch, RecordAccumulator
from pykraft.client.producer.partitioner import DefaultPartitioner, partition_for_key
from pykraft.client.types import RecordMetadata, TopicPartition
from pykraft.proto import extensions
from pykraft.proto.record_batch import NO_PRODUCER_ID, Compression

_compiled = extensions.compiled("pykraft.client.producer._open_batches")
TOPICS = {"a": 3, "b": 1, "c": 5}  # "c" is known only after a wait for its metadata
MAX_BLOCK_MS = 0

sends = st.tuples(
    st.just("send"),
    st.sampled_from([*TOPICS, "missing"]),
    st.none() | st.binary(max_size=120) | st.just("text"),  # value
    st.none() | st.binary(max_size=24) | st.just(7),  # key
    st.none() | st.integers(-1, 5),  # partition
    st.none() | st.just([("h", b"1"), ("i", None)]),  # headers
    st.integers(0, 1 << 41),  # timestamp_ms
    st.booleans(),  # on_delivery
)
steps = st.lists(sends | st.just(("drain",)) | st.just(("finish",)), min_size=1, max_size=60)
Outcome = tuple[object, ...]


class StubMetadata:
    """What SendPath reads of ClusterMetadata: the counts of followed topics, and a wait that
    follows a topic the cluster has or raises as the real one does after max_block_ms."""

    def __init__(self) -> None:
        self.known_partition_counts = {topic: TOPICS[topic] for topic in ("a", "b")}

    def wait_for_topic(self, topic: str, timeout_ms: int) -> int:
        if topic not in TOPICS:
            raise UnknownTopicOrPartitionError(f"{topic} not known after {timeout_ms} ms")
        self.known_partition_counts[topic] = TOPICS[topic]
        return TOPICS[topic]


def _wait_for_partition(topic: str, partition: int, count: int) -> int:
    """The producer's, when the topic never grows."""
    raise ValueError(f"partition {partition} is not in [0, {count}) for topic {topic!r}")


class AskedPartitioner(DefaultPartitioner):
    """A partitioner the compiled path does not know as the default one: it must call it."""

    def partition(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        self.asked += 1
        return super().partition(topic, key, num_partitions)

    asked = 0


@dataclass
class Side:
    path: open_batches.SendPath
    accumulator: RecordAccumulator
    partitioner: DefaultPartitioner
    delivered: list[tuple[RecordMetadata | None, str | None]] = field(default_factory=list)
    drained: list[ProducerBatch] = field(default_factory=list)


@contextmanager
def _batches_of(cls: type[open_batches.OpenBatches]) -> Iterator[None]:
    with mock.patch.object(accumulator, "OpenBatches", cls):
        yield


def _side(
    path: type[open_batches.SendPath],
    batches: type[open_batches.OpenBatches],
    partitioner: DefaultPartitioner,
    batch_size: int,
) -> Side:
    with _batches_of(batches):
        made = RecordAccumulator(
            batch_size=batch_size,
            linger_ms=0,
            buffer_memory=1 << 24,
            compression=Compression.NONE,
            wakeup=threading.Event(),
        )
    send_path = path(
        StubMetadata(),  # type: ignore[arg-type]
        partitioner,
        made.open_batches,
        max_block_ms=MAX_BLOCK_MS,
        wait_for_partition=_wait_for_partition,
    )
    return Side(send_path, made, partitioner)


def _sides(seed: int, batch_size: int) -> list[Side]:
    """The pure-Python side first, then every other combination."""
    compiled_path, pure_path = _compiled.SendPath, open_batches.SendPath
    compiled_batches, pure_batches = _compiled.OpenBatches, open_batches.OpenBatches
    return [
        _side(pure_path, pure_batches, DefaultPartitioner(random.Random(seed)), batch_size),
        _side(compiled_path, compiled_batches, DefaultPartitioner(random.Random(seed)), batch_size),
        _side(compiled_path, pure_batches, DefaultPartitioner(random.Random(seed)), batch_size),
        _side(pure_path, compiled_batches, DefaultPartitioner(random.Random(seed)), batch_size),
        _side(compiled_path, compiled_batches, AskedPartitioner(random.Random(seed)), batch_size),
    ]


def _send(side: Side, step: tuple[object, ...]) -> Outcome:
    """Where the record went (topic, partition, index in its batch), or the error."""
    key, partition, callback = step[3], step[4], step[7]

    def on_delivery(metadata: RecordMetadata | None, error: BaseException | None) -> None:
        side.delivered.append((metadata, None if error is None else str(error)))

    arguments: list[Any] = [*step[1:7], on_delivery if callback else None]  # drawn: any type
    try:
        future = side.path.send(*arguments)
    except Exception as error:
        return type(error).__name__, str(error)
    where = future._tp, future._index, future._timestamp_ms
    if type(key) is bytes and partition is None:
        assert future._tp.partition == partition_for_key(key, TOPICS[future._tp.topic])
    return "sent", where, dict(side.partitioner.sticky)


def _drain(side: Side) -> Outcome:
    tps = [TopicPartition(topic, p) for topic, count in TOPICS.items() for p in range(count)]
    batches = side.accumulator.drain(tps, lambda _, taken: taken == 0, 0)
    side.drained.extend(batches)
    return "drained", [(b.tp, b.builder.record_count()) for b in batches]


def _finish(side: Side) -> Outcome:
    """Sends every batch drained so far, completes each or fails every third: their bytes."""
    while _drain(side)[1]:
        pass
    sent = []
    for number, batch in enumerate(side.drained):
        sent.append(
            batch.seal(7 + number, 1, 3 * number)
            if number % 2
            else batch.seal(NO_PRODUCER_ID, -1, -1)
        )
        if number % 3 == 2:
            batch.fail(KafkaError(f"batch {number} failed"))
        else:
            batch.complete(100 * number, -1)
        side.accumulator.deallocate(batch)
    side.drained.clear()
    return "finished", sent, list(side.delivered)


def _step(side: Side, step: tuple[object, ...]) -> Outcome:
    if step[0] == "send":
        return _send(side, step)
    return _drain(side) if step[0] == "drain" else _finish(side)


@settings(max_examples=150, deadline=None)
@given(steps=steps, seed=st.integers(0, 1000), batch_size=st.integers(80, 3000))
def test_every_send_path_sends_the_same_records_to_the_same_batches(
    steps: list[tuple[object, ...]], seed: int, batch_size: int
) -> None:
    pure, *others = _sides(seed, batch_size)
    chosen = 0  # records sent whose partition the partitioner chose
    for step in [*steps, ("finish",)]:
        expected = _step(pure, step)
        for side in others:
            assert _step(side, step) == expected, step
        chosen += expected[0] == "sent" and step[4] is None
    asked = others[-1].partitioner
    assert isinstance(asked, AskedPartitioner)
    assert asked.asked >= chosen, "the compiled path asks a partitioner it does not know"


def test_a_closed_send_path_refuses_records_on_both() -> None:
    for side in _sides(seed=1, batch_size=1000):
        side.path.closed = True
        step = ("send", "a", b"v", None, None, None, 1, False)
        assert _send(side, step) == ("RuntimeError", "the producer is closed")
