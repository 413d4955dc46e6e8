"""The checks both listener fuzzers make, against a listener in this process or a broker's:
pipelined requests answered in order on a connection that stays usable, bad bytes answered or
closed cleanly (`frames.py`), and the sockets a listener holds let go once its connections are
gone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

from hypothesis import given
from hypothesis import strategies as st

from ...integration.processes import wait_for
from .answers import SENT, answer_problems, api_name, fuzzing
from .frames import Case, cases, check_case
from .requests import KafkaRequest, Vocabulary, requests
from .wire import Connection

PIPELINED_MAX: Final = 4
PRODUCE_KEY: Final = 0
RELEASE_TIMEOUT_S: Final = 20.0


def pipelined(
    versions: list[tuple[int, int]], vocabulary: Vocabulary
) -> st.SearchStrategy[list[KafkaRequest]]:
    """1 to PIPELINED_MAX requests of any of `versions`, sent back to back."""
    one = st.sampled_from(versions).flatmap(lambda api: requests(*api, vocabulary))
    return st.lists(one, min_size=1, max_size=PIPELINED_MAX)


def check_pipelined(connection: Connection, batch: list[KafkaRequest]) -> None:
    """Sends `batch` and an ApiVersions probe at once: every request is answered in order (but
    Produce with acks=0), then the probe."""
    connection.send(b"".join(request.frame() for request in batch))
    for request in batch:
        if request.api[0] == PRODUCE_KEY and request.body.acks == 0:
            continue
        payload = connection.answer()
        assert payload is not None, f"{api_name(*request.api)}: the connection closed"
        found = answer_problems(request.api, request.correlation_id, payload)
        assert not found, f"{api_name(*request.api)}: {found}"
    connection.assert_usable()


def fuzz_pipelined(
    address: tuple[str, int],
    versions: list[tuple[int, int]],
    vocabulary: Vocabulary,
    examples: int,
    where: str,
) -> None:
    @fuzzing(examples)
    @given(batch=pipelined(versions, vocabulary))
    def send(batch: list[KafkaRequest]) -> None:
        for request in batch:
            SENT[f"{api_name(*request.api)} @{where}"] += 1
        with Connection(address) as connection:
            check_pipelined(connection, batch)

    send()


def fuzz_bytes(
    address: tuple[str, int],
    served: dict[int, tuple[int, int]],
    vocabulary: Vocabulary,
    examples: int,
    where: str,
) -> None:
    @fuzzing(examples)
    @given(case=cases(served, vocabulary))
    def send(case: Case) -> None:
        SENT[f"bytes: {case.kind} @{where}"] += 1
        with Connection(address) as connection:
            check_case(connection, case)

    send()


def open_sockets(pid: int) -> int:
    """How many sockets process `pid` holds open (its log files may come and go: segments roll,
    so only sockets tell whether closed connections were let go)."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += str(fd.readlink()).startswith("socket:")
        except OSError:  # closed meanwhile
            continue
    return count


def assert_released(count: Callable[[], int], baseline: int, slack: int, what: str) -> None:
    """`count()` comes back to at most `baseline + slack` (the listener let go of what its
    closed connections held)."""
    wait_for(
        lambda: count() <= baseline + slack,
        timeout_s=RELEASE_TIMEOUT_S,
        what=f"{what} back to at most {baseline + slack}",
    )
