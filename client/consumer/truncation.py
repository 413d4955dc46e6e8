"""What the consumer does when the leader says its log parts from what was fetched (KIP-320).

After an unclean leader election the new leader may lack records the consumer already read
(they were below the old leader's high-water mark, but no other replica had them), and other
records take their offsets. Reading on from the consumer's position would hand those out as if
they followed what it read. So each Fetch carries the leader epoch of the last batch fetched
(`last_fetched_epoch`), and a leader whose log does not hold that epoch up to the fetch offset
answers `diverging_epoch`: the end offset of the largest epoch it has at or below it, i.e. the
first offset that may differ. (Kafka's consumer learns the same end offset with an
OffsetsForLeaderEpoch request after each leader change; pykraft's broker answers it in the Fetch,
as it does for followers, so no extra round trip and no window after the change.)

The consumer's thread then decides, as Kafka's `SubscriptionState.maybeCompleteValidation`:

- end offset below the position: records it handed out are gone. With a reset policy the
  position moves back to the end offset (the new history is read from where it begins) and a
  warning is logged; with auto_offset_reset "none" LogTruncationError is raised, with the
  position and the divergent offset, on every poll until the application seeks.
- the leader cannot say (no epoch at or below, an undefined answer): reset by the policy
  (earliest/latest), or LogTruncationError without a divergent offset.
- otherwise everything handed out is in the leader's log; only records fetched ahead past the
  end offset may not be. They are dropped and fetched again from the position, with the
  leader's epoch as the last fetched one (the leader agrees with it up to there).
"""

from __future__ import annotations

import logging

from pykraft.client.consumer.fetch_buffer import CompletedFetch
from pykraft.client.consumer.subscription import (
    RESET_TIMESTAMPS,
    PartitionState,
    SubscriptionState,
)
from pykraft.client.errors import LogTruncationError
from pykraft.client.types import OffsetAndMetadata

log = logging.getLogger(__name__)


def diverging_fetch(state: PartitionState) -> CompletedFetch | None:
    """The leader's diverging answer waiting in `state`'s queue (always its last entry: it
    stops fetching), or None."""
    if state.fetches and state.fetches[-1].diverging is not None:
        return state.fetches[-1]
    return None


def handle_divergence(
    subscription: SubscriptionState, state: PartitionState, auto_offset_reset: str
) -> None:
    """Settles the diverging answer queued for `state` (see the module docstring); raises
    LogTruncationError when the log was truncated below the position and the policy is "none".
    Call with the subscription's lock held, from the consumer's thread."""
    marker = diverging_fetch(state)
    assert marker is not None and marker.diverging is not None
    assert state.position is not None, "only a partition with a position fetches"
    epoch, end_offset = marker.diverging
    position, tp = state.position, state.tp
    reset = RESET_TIMESTAMPS.get(auto_offset_reset)
    if epoch < 0 or end_offset < 0:
        if reset is None:
            _keep_raising(subscription, state, marker)
            raise LogTruncationError(
                f"truncation detected for {tp} at offset {position}: the leader holds no "
                f"epoch at or below the last one fetched, and auto_offset_reset is 'none'",
                fetch_offsets={tp: position},
            )
        log.warning(
            "Truncation detected for %s at offset %d, resetting offset (%s)",
            tp,
            position,
            auto_offset_reset,
        )
        subscription.move(state, None, reset)
    elif end_offset < position:
        if reset is None:
            _keep_raising(subscription, state, marker)
            raise LogTruncationError(
                f"truncation detected for {tp} at offset {position}: the leader's log parts "
                f"from what was read at offset {end_offset} (end of leader epoch {epoch}), "
                f"and auto_offset_reset is 'none': seek to {end_offset} to read the new "
                "records there, or elsewhere",
                fetch_offsets={tp: position},
                divergent_offsets={tp: OffsetAndMetadata(end_offset, "", epoch)},
            )
        log.warning(
            "Truncation detected for %s at offset %d, resetting offset to the first offset "
            "known to diverge %d (leader epoch %d)",
            tp,
            position,
            end_offset,
            epoch,
        )
        subscription.move(state, end_offset, None, epoch=epoch)
    else:
        position_epoch = state.position_epoch
        subscription.move(state, position, None, epoch=position_epoch)
        state.fetch_epoch = epoch


def _keep_raising(
    subscription: SubscriptionState, state: PartitionState, marker: CompletedFetch
) -> None:
    """Drops what was fetched for `state` but the diverging answer, which stays (fetching
    nothing) so every poll raises again until the application seeks, as Kafka's consumer
    keeps raising while the partition awaits validation."""
    subscription.invalidate(state)
    subscription.append(state, marker)
