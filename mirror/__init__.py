"""Mirroring between clusters (`pykraft mirror`), Kafka MirrorMaker 2's model on pykraft's own
client: records of the source's partitions copied to the same partitions of remote topics on the
target, the offsets that pairs them kept as offset syncs, and consumer groups' offsets
translated as checkpoints. See `mirror_maker` for the process, `partition_copier` and `resume`
for delivery, `offset_syncs` and `checkpoints` for translation."""
