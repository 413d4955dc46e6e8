"""The errors of the Raft storage: files that cannot be trusted or written stop the node."""

from __future__ import annotations


class RaftStorageError(Exception):
    """The Raft files cannot be trusted or written; the node must stop rather than guess."""


class JournalCorruptError(RaftStorageError):
    """The journal is damaged somewhere a crash cannot explain (not a torn tail)."""


class SnapshotCorruptError(RaftStorageError):
    """The snapshot file fails its magic, version or checksum test."""
