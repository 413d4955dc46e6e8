"""The errors of the metadata log package, so callers can tell a bug from bad input.

- `InvariantError` (an `AssertionError`): the log itself is inconsistent. The controller decides
  the log, so such a record is a bug; the node must stop rather than skip it.
- `CorruptRecordError` (a `ValueError`): bytes that do not decode to a record.
- `ConfigValidationError` (a `ValueError`): a user asked for a config value Kafka would refuse.
"""

from __future__ import annotations


class InvariantError(AssertionError):
    """An invariant of the metadata log broke; the process must not carry on as if it had not."""


class MetadataReplayError(InvariantError):
    """A record cannot apply to the image it follows (unknown topic, epoch going back, ...)."""


class CorruptRecordError(ValueError):
    """The bytes are not a valid encoding of metadata records (truncated, unknown type, ...)."""


class ConfigValidationError(ValueError):
    """A config key or value is not acceptable; the message says why in one sentence."""
