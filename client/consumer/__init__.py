"""The consumer: `Consumer` (consumer.py) and its parts.

- `config`: the settings, Kafka's names and defaults, checked once.
- `subscription`: per-partition positions and the prefetch buffer, shared by the two threads.
- `fetcher`: the background thread that fetches ahead and looks up positions to reset.
- `fetch_buffer`: fetched batches kept as raw bytes, decoded one batch at a time by `poll`.
- `offsets`: ListOffsets (offsets_for_times, beginning_offsets, end_offsets).
"""
