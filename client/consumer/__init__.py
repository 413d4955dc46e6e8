"""The consumer: `Consumer` (consumer.py) and its parts.

- `config`: the settings, Kafka's names and defaults, checked once.
- `subscription`: per-partition positions and the prefetch buffer, shared by the two threads.
- `fetcher`: the background thread that fetches ahead and looks up positions to reset.
- `fetch_buffer`: fetched batches kept as raw bytes, decoded one batch at a time by `poll`.
- `offset_queries`: offsets_for_times, beginning_offsets, end_offsets, partitions_for.
- `shutdown`: close, which any thread may call, and the finalizer of a dropped consumer.
- `group`: a subscribed consumer's group work inside poll: reconciliation, auto commit, leave.
- `membership`: the member id, epoch and assignment target, and the heartbeat thread (KIP-848).
- `commits`: OffsetCommit (in order, on one thread) and OffsetFetch.
- `listener`: `ConsumerRebalanceListener`.
"""
