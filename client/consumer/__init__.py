"""The consumer: `Consumer` and its fetcher."""
