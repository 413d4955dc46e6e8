"""Tests of the partition log storage engine (pykraft.broker.log)."""
