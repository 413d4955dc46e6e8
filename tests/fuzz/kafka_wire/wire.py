"""A client's side of a Kafka connection for the fuzzers: bytes out, answer frames in, every read
within a deadline, so a listener that neither answers nor closes fails the test as a hang."""

from __future__ import annotations

import contextlib
import socket
import time
from typing import Final

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.codec import SIZE, decode_response

from .requests import KafkaRequest

ANSWER_TIMEOUT_S: Final = 10.0
ANSWERS_MAX: Final = 16  # frames read from one connection before it must have closed
PROBE_CORRELATION_ID: Final = 1_414


class Connection:
    """One TCP connection to a Kafka listener."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=ANSWER_TIMEOUT_S)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def finish_sending(self) -> None:
        """Ends the byte stream (the listener reads end of stream), keeping the answers; the
        listener may have closed already (it refused bytes it had not read)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def answer(self) -> bytes | None:
        """The next answer frame's payload; None when the listener closed the connection
        first. Fails on a hang (ANSWER_TIMEOUT_S) and on a connection closed mid-frame."""
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        prefix = self._read(SIZE.size, deadline)
        if not prefix:
            return None
        assert len(prefix) == SIZE.size, f"the connection closed inside a size prefix: {prefix!r}"
        (size,) = SIZE.unpack(prefix)
        assert size >= 0, f"an answer frame of size {size}"
        payload = self._read(size, deadline)
        assert len(payload) == size, f"the connection closed {len(payload)} bytes into {size}"
        return payload

    def answers_until_closed(self) -> list[bytes]:
        """Every answer left, once `finish_sending` was called: the listener must close."""
        answers: list[bytes] = []
        for _ in range(ANSWERS_MAX):
            payload = self.answer()
            if payload is None:
                return answers
            answers.append(payload)
        raise AssertionError(f"{ANSWERS_MAX} answers and the connection is still open")

    def assert_usable(self) -> None:
        """An ApiVersions on this connection is answered."""
        self.advertised()

    def advertised(self) -> dict[int, tuple[int, int]]:
        """The listener's ApiVersions table, asked on this connection: (min, max) by key."""
        self.send(probe().frame())
        payload = self.answer()
        assert payload is not None, "the listener closed the connection"
        correlation_id, body = decode_response(payload, ApiVersionsResponse)
        assert (correlation_id, body.error_code) == (PROBE_CORRELATION_ID, ErrorCode.none)
        return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}

    def _read(self, count: int, deadline: float) -> bytes:
        data = b""
        while len(data) < count:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no answer and no close within {ANSWER_TIMEOUT_S}s"
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(count - len(data))
            except TimeoutError:
                raise AssertionError(f"no answer and no close within {ANSWER_TIMEOUT_S}s") from None
            except ConnectionResetError:
                return data
            if not chunk:
                return data
            data += chunk
        return data


def probe() -> KafkaRequest:
    """The ApiVersions request that checks a connection still serves."""
    body = ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")
    return KafkaRequest(body, PROBE_CORRELATION_ID, "fuzz-probe")
