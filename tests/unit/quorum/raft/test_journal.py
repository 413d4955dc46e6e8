"""DurableJournal, the quorum-state file and the snapshot file, on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pykraft.quorum.raft import JournalCorruptError, RaftStorageError
from pykraft.quorum.raft.journal import (
    JOURNAL_FILE_NAME,
    QUORUM_STATE_FILE_NAME,
    DurableJournal,
    QuorumState,
    encode_frame,
    read_quorum_state,
)


def _journal_with(directory: Path, count: int, first_index: int = 1) -> DurableJournal:
    journal = DurableJournal(directory)
    for index in range(first_index, first_index + count):
        journal.add(b"command-%d" % index, index, 1 + index // 4)
    journal.flush()
    return journal


def _reopen(journal: DurableJournal, directory: Path) -> DurableJournal:
    journal._destroy()
    return DurableJournal(directory)


def _indexes(journal: DurableJournal) -> list[int]:
    return [index for _, index, _ in journal[:]]


def test_entries_read_back_after_reopen(tmp_path: Path) -> None:
    journal = _journal_with(tmp_path, 5)
    reopened = _reopen(journal, tmp_path)
    assert reopened[:] == [(b"command-%d" % i, i, 1 + i // 4) for i in range(1, 6)]
    assert len(reopened) == 5 and reopened[-1] == (b"command-5", 5, 2)
    assert reopened.durable_end_index == 5 and not reopened.dirty
    reopened._destroy()


@pytest.mark.parametrize("damage", ["cut mid-frame", "flip a byte in the last frame"])
def test_torn_tail_is_cut_on_open_and_earlier_entries_survive(tmp_path: Path, damage: str) -> None:
    journal = _journal_with(tmp_path, 4)
    journal._destroy()
    path = tmp_path / JOURNAL_FILE_NAME
    good_size = path.stat().st_size
    last_frame_size = len(encode_frame(b"command-4", 4, 2))
    if damage == "cut mid-frame":
        os.truncate(path, good_size - 3)
    else:
        data = bytearray(path.read_bytes())
        data[-2] ^= 0x40
        path.write_bytes(bytes(data))

    reopened = DurableJournal(tmp_path)
    assert _indexes(reopened) == [1, 2, 3]
    assert path.stat().st_size == good_size - last_frame_size
    reopened.add(b"again", 4, 2)  # the log continues where the intact part ends
    reopened = _reopen(reopened, tmp_path)
    assert reopened[-1] == (b"again", 4, 2) and len(reopened) == 4
    reopened._destroy()


def test_valid_frames_that_skip_an_index_are_corruption_not_a_torn_tail(tmp_path: Path) -> None:
    journal = _journal_with(tmp_path, 2)
    journal._destroy()
    with open(tmp_path / JOURNAL_FILE_NAME, "ab") as file:
        file.write(encode_frame(b"far", 9, 1))
    with pytest.raises(JournalCorruptError, match="entry 9 follows entry 2"):
        DurableJournal(tmp_path)


def test_a_foreign_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / JOURNAL_FILE_NAME).write_bytes(b"PYSYNCOBJ\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0")
    with pytest.raises(JournalCorruptError, match="not a journal"):
        DurableJournal(tmp_path)


def test_delete_entries_from_truncates_the_file(tmp_path: Path) -> None:
    journal = _journal_with(tmp_path, 6)
    journal.deleteEntriesFrom(2)  # a list position: keeps entries 1 and 2
    assert _indexes(journal) == [1, 2] and journal.dirty
    assert journal.durable_end_index == 2
    journal.add(b"replacement", 3, 9)
    reopened = _reopen(journal, tmp_path)
    assert reopened[:] == [(b"command-1", 1, 1), (b"command-2", 2, 1), (b"replacement", 3, 9)]
    reopened._destroy()


def test_delete_entries_to_keeps_the_suffix_in_a_rewritten_file(tmp_path: Path) -> None:
    journal = _journal_with(tmp_path, 6)
    journal.add(b"not yet flushed", 7, 3)
    inode_before = (tmp_path / JOURNAL_FILE_NAME).stat().st_ino
    journal.deleteEntriesTo(4)  # keeps list positions 4.. = entries 5, 6, 7
    assert _indexes(journal) == [5, 6, 7]
    assert not journal.dirty and journal.durable_end_index == 7
    assert (tmp_path / JOURNAL_FILE_NAME).stat().st_ino != inode_before
    journal.add(b"after", 8, 3)
    reopened = _reopen(journal, tmp_path)
    assert _indexes(reopened) == [5, 6, 7, 8] and reopened[2] == (b"not yet flushed", 7, 3)
    assert not (tmp_path / (JOURNAL_FILE_NAME + ".tmp")).exists()
    reopened._destroy()


def test_clear_then_add_starts_a_log_anywhere(tmp_path: Path) -> None:
    journal = _journal_with(tmp_path, 3)
    journal.clear()
    journal.add(b"snapshot-previous", 40, 5)
    journal.add(b"snapshot-last", 41, 5)
    reopened = _reopen(journal, tmp_path)
    assert _indexes(reopened) == [40, 41]
    reopened._destroy()


def test_term_and_vote_survive_reopen(tmp_path: Path) -> None:
    journal = _journal_with(tmp_path, 1)
    assert (journal.getCurrentTerm(), journal.getVotedForNodeId()) == (0, None)
    journal.setCurrentTerm(7, "127.0.0.1:9001")
    # stored synchronously: visible to a reader of the file before any close
    assert read_quorum_state(tmp_path / QUORUM_STATE_FILE_NAME).current_term == 7
    reopened = _reopen(journal, tmp_path)
    assert (reopened.getCurrentTerm(), reopened.getVotedForNodeId()) == (7, "127.0.0.1:9001")
    reopened.setCurrentTerm(8, None)
    reopened = _reopen(reopened, tmp_path)
    assert (reopened.getCurrentTerm(), reopened.getVotedForNodeId()) == (8, None)
    reopened._destroy()


def test_stored_commit_index_never_points_past_the_flushed_journal(tmp_path: Path) -> None:
    journal = _journal_with(tmp_path, 3)
    journal.add(b"unflushed", 4, 2)
    journal.setRaftCommitIndex(4)
    journal.setCurrentTerm(3, None)  # stores the state while entry 4 is not on disk yet
    assert read_quorum_state(tmp_path / QUORUM_STATE_FILE_NAME).commit_index == 3
    journal.onOneSecondTimer()  # flushes, then stores the commit index
    assert not journal.dirty
    assert read_quorum_state(tmp_path / QUORUM_STATE_FILE_NAME) == QuorumState(3, None, 4)
    reopened = _reopen(journal, tmp_path)
    assert reopened.getRaftCommitIndex() == 4
    reopened._destroy()


def test_flush_syncs_only_after_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = _journal_with(tmp_path, 1)
    syncs: list[int] = []
    real_fdatasync = os.fdatasync

    def counting_fdatasync(fd: int) -> None:
        syncs.append(fd)
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", counting_fdatasync)
    journal.flush()
    assert syncs == []
    journal.add(b"x", 2, 1)
    assert journal.dirty and journal.durable_end_index == 1
    journal.flush()
    journal.flush()
    assert len(syncs) == 1 and journal.durable_end_index == 2
    journal._destroy()


def test_a_damaged_quorum_state_is_refused(tmp_path: Path) -> None:
    journal = _journal_with(tmp_path, 1)
    journal.setCurrentTerm(2, "a:1")
    journal._destroy()
    path = tmp_path / QUORUM_STATE_FILE_NAME
    path.write_bytes(path.read_bytes().replace(b'"current_term": 2', b'"current_term": 3'))
    with pytest.raises(RaftStorageError, match="checksum"):
        DurableJournal(tmp_path)
