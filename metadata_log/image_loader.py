"""Building an image from a snapshot's chunks (`SnapshotLoader`, `image_of_chunks`): the
controller's restore, a broker's stored image at start and a whole-image MetadataFetch.

A snapshot lists each topic's TopicRecord followed by its PartitionRecords (`MetadataImage.write`),
so the topics are built in bulk: each topic's partitions straight into its persistent map, the
replica and leader counts and the per-broker indexes once per topic, instead of replaying every
partition through a `MetadataDelta` (which keeps counts and indexes in step one change at a
time). At a million partitions that halves what a restore spends beyond decoding.

The bulk run takes only what a delta would take the same way: the first unbroken run of new
topics, each with new partitions. Any other record (a feature, a broker, a config, a topic's
partition out of its run, a partition listed twice) ends the run, and it and everything after it
replays through a delta, with a delta's checks. What a caller may rely on: the image equals the
one replaying every record onto the empty image gives, and a record that could not replay raises
MetadataReplayError as it would there. Memory beyond the image is one chunk's records and the
topic being read, as each chunk is applied as it is drawn.

Within the run, each topic's PartitionRecords are read from the chunk's bytes straight into
registrations (`partition_runs.read_partition_run`, compiled), never as record objects; any
frame that reader leaves is decoded and taken the general way.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from uuid import UUID

from immutables import Map

from pykraft.metadata_log.codec import batch_record_count, check_batch_end, decode_frame
from pykraft.metadata_log.delta import MetadataDelta
from pykraft.metadata_log.image import (
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    TopicsImage,
    count_topic_load,
)
from pykraft.metadata_log.partition_index import IndexBuilder
from pykraft.metadata_log.partition_runs import read_partition_run_python
from pykraft.metadata_log.records import PartitionRecord, Record, TopicRecord
from pykraft.proto.extensions import load as load_extension

_compiled = load_extension("pykraft.metadata_log._partition_records")
read_partition_run = (
    read_partition_run_python if _compiled is None else _compiled.read_partition_run
)

_BrokerTopics = dict[int, dict[UUID, Map[int, bool]]]


class _TopicsBuilder:
    """The topics of a bulk run, each finished (made persistent, counted, indexed) when the next
    one starts."""

    def __init__(self) -> None:
        self.by_id: dict[UUID, TopicImage] = {}
        self.by_name: dict[str, UUID] = {}
        self.replicas: Counter[int] = Counter()
        self.leaders: Counter[int] = Counter()
        self.indexes = IndexBuilder()
        self._topic: TopicRecord | None = None
        self._partitions: dict[int, PartitionRegistration] = {}

    def take(self, record: Record) -> bool:
        """Adds `record` if it continues the run (a new topic, or a new partition of the topic
        being read); False, adding nothing, if it does not."""
        if isinstance(record, PartitionRecord):
            topic = self._topic
            if topic is None or record.topic_id != topic.topic_id:
                return False
            if record.partition_id in self._partitions:
                return False
            self._partitions[record.partition_id] = PartitionRegistration.from_record(record)
            return True
        if not isinstance(record, TopicRecord):
            return False
        self._finish_topic()
        if record.topic_id in self.by_id or record.name in self.by_name:
            return False  # a delta refuses it, with its own message
        self._topic = record
        return True

    def take_run(self, data: bytes, pos: int, count: int) -> tuple[int, int]:
        """Takes the frames of batch `data` from `pos` (at most `count`) that continue the
        topic being read, as `read_partition_run` does: (position after them, how many)."""
        if self._topic is None:
            return pos, 0
        return read_partition_run(data, pos, count, self._topic.topic_id.bytes, self._partitions)

    def _finish_topic(self) -> None:
        topic, partitions = self._topic, self._partitions
        if topic is None:
            return
        self.by_id[topic.topic_id] = TopicImage(topic.name, topic.topic_id, Map(partitions))
        self.by_name[topic.name] = topic.topic_id
        count_topic_load(partitions.values(), self.replicas, self.leaders)
        self.indexes.add_topic(topic.topic_id, partitions)
        self._topic, self._partitions = None, {}

    def image(self) -> TopicsImage:
        self._finish_topic()
        return TopicsImage(
            Map(self.by_id),
            Map(self.by_name),
            Map(self.replicas),
            Map(self.leaders),
            *self.indexes.indexes(),
        )


class SnapshotLoader:
    """Builds the image of a snapshot as of `offset` and `epoch` from its records, taken in
    order a chunk at a time (`take_chunk`); `image()` once the last chunk is taken."""

    def __init__(self, *, offset: int, epoch: int) -> None:
        self._offset, self._epoch = offset, epoch
        self._image = dataclasses.replace(MetadataImage.EMPTY, offset=offset, epoch=epoch)
        self._delta = MetadataDelta(self._image)
        self._builder: _TopicsBuilder | None = None
        self._bulk_done = False

    def take_chunk(self, chunk: bytes) -> int:
        """Takes the next chunk (a batch of the codec, `encode_chunks`); returns how many records
        it held. CorruptRecordError if it does not decode, MetadataReplayError if a record cannot
        apply (the loader is then of no further use, whatever it took of the chunk)."""
        count, pos = batch_record_count(chunk)
        index = 0
        while index < count:
            if self._builder is not None:
                pos, taken = self._builder.take_run(chunk, pos, count - index)
                index += taken
                if index == count:
                    break
            record, pos = decode_frame(chunk, pos, index)
            index += 1
            if self._bulk_done or not self._bulk(record):
                self._delta.replay(record)
        check_batch_end(chunk, pos)
        self._image = self._delta.apply(offset=self._offset, epoch=self._epoch)
        self._delta = MetadataDelta(self._image)
        return count

    def _bulk(self, record: Record) -> bool:
        """Whether the bulk run took `record`; starts the run at the first topic, ends it at
        the first record it cannot take."""
        if self._builder is None and isinstance(record, TopicRecord):
            self._image = self._delta.apply(offset=self._offset, epoch=self._epoch)
            self._delta, self._builder = MetadataDelta(self._image), _TopicsBuilder()
        if self._builder is None:
            return False
        if self._builder.take(record):
            return True
        self._end_bulk()
        return False

    def _end_bulk(self) -> None:
        assert self._builder is not None
        self._image = dataclasses.replace(self._image, topics=self._builder.image())
        self._delta, self._builder, self._bulk_done = MetadataDelta(self._image), None, True

    def image(self) -> MetadataImage:
        if self._builder is not None:  # the snapshot ended inside the run
            self._end_bulk()
        return self._image


def image_of_chunks(chunks: Iterable[bytes], *, offset: int, epoch: int) -> MetadataImage:
    """The image a snapshot's `chunks` (the codec's batches of its records, as `encode_chunks`
    cuts them) describe, as of `offset` and `epoch`. Each chunk is decoded and taken on its own
    as it is drawn, so what a restore holds beyond the image is one chunk's records, never the
    whole snapshot's."""
    loader = SnapshotLoader(offset=offset, epoch=epoch)
    for chunk in chunks:
        loader.take_chunk(chunk)
    return loader.image()
