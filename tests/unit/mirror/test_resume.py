"""A restart recognises the records already on the target, in order, and copies from the first
that differs; a mismatch can cause a duplicate, never a loss (issue 15 §2.3)."""

from __future__ import annotations

from pykraft.client import ConsumerRecord
from pykraft.mirror.resume import TailMatcher, same_record
from pykraft.proto.record_batch import TimestampType


def record(
    offset: int,
    value: bytes,
    *,
    timestamp: int = 1000,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    headers: tuple[tuple[str, bytes | None], ...] = (),
) -> ConsumerRecord:
    return ConsumerRecord("t", 0, offset, timestamp, timestamp_type, b"k", value, headers)


def test_the_tail_is_matched_as_a_prefix() -> None:
    tail = [record(10, b"a"), record(11, b"b")]
    matcher = TailMatcher(tail)
    assert matcher.match(record(100, b"a")) == 10
    assert not matcher.done
    assert matcher.match(record(101, b"b")) == 11
    assert matcher.done and matcher.unmatched == 0
    assert matcher.match(record(102, b"c")) is None  # new


def test_the_first_difference_ends_matching_even_if_a_later_record_would_match() -> None:
    """Never skip on the strength of a later match: the worst outcome is a duplicate."""
    matcher = TailMatcher([record(10, b"a"), record(11, b"b")])
    assert matcher.match(record(100, b"b")) is None
    assert matcher.done and matcher.unmatched == 2
    assert matcher.match(record(101, b"b")) is None


def test_an_empty_tail_is_done_at_once() -> None:
    assert TailMatcher([]).done


def test_what_a_copy_keeps_is_compared() -> None:
    source = record(5, b"v", headers=(("h", b"1"),))
    assert same_record(source, record(0, b"v", headers=(("h", b"1"),)))
    assert not same_record(source, record(0, b"v", headers=(("h", b"2"),)))
    assert not same_record(source, record(0, b"w", headers=(("h", b"1"),)))
    assert not same_record(source, record(0, b"v", headers=(("h", b"1"),), timestamp=1001))


def test_a_target_that_stamps_its_own_time_is_compared_without_it() -> None:
    source = record(5, b"v")
    stamped = record(0, b"v", timestamp=99, timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert same_record(source, stamped)
