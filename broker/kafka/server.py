"""The Kafka protocol listener: an asyncio server on its own thread.

Framing is Kafka's: a 4-byte big-endian size, then the request. Frames are decoded on the event
loop, answered on a bounded thread pool (handlers block: acks=all waits, long polls) and written
back in request order, so a client may pipeline up to `IN_FLIGHT_MAX` requests per connection
(more: reading that connection pauses until the oldest answer is written). A frame larger than
`socket.request.max.bytes`, a negative size, an unreadable frame, an API or version not served,
or a handler that raises closes that connection (with a log line), as Kafka does; the listener
keeps serving the others. `stop` closes every connection and waits for the loop's thread.

Fetch answers (FetchFrame) are sent zero copy: the framing bytes are written, then each
partition's records go from the segment file to the socket with sendfile (issue 14 §3).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final

from pykraft.broker.kafka.api import KafkaServices
from pykraft.broker.kafka.codec import SIZE, FrameError
from pykraft.broker.kafka.dispatch import Dispatcher
from pykraft.broker.kafka.fetch_frame import FetchFrame
from pykraft.broker.log import FileRange

log = logging.getLogger(__name__)

# Kafka's socket.request.max.bytes default: larger frames close the connection.
REQUEST_BYTES_MAX: Final = 104_857_600
CONNECTIONS_MAX: Final = 1000
IN_FLIGHT_MAX: Final = 64  # requests read ahead of their answers, per connection
WORKERS_MAX: Final = 64  # handler threads for short requests, shared by all connections
_START_TIMEOUT_S: Final = 10.0
_STOP_TIMEOUT_S: Final = 5.0

_Answer = asyncio.Future[bytes | FetchFrame | None]


class KafkaListener:
    """Serves `dispatcher`'s Apis on host:port once `start` returns (port 0: any free one)."""

    def __init__(
        self,
        host: str,
        port: int,
        dispatcher: Dispatcher,
        services: KafkaServices,
        *,
        request_bytes_max: int = REQUEST_BYTES_MAX,
        workers_max: int = WORKERS_MAX,
    ) -> None:
        self._address = (host, port)
        self._dispatcher = dispatcher
        self._services = services
        self._request_bytes_max = request_bytes_max
        self._pool = ThreadPoolExecutor(workers_max, thread_name_prefix="kafka-handler")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kafka-listener")
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = port

    def start(self) -> None:
        """Binds and serves; raises OSError if it cannot bind."""
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._bind(), self._loop)
        try:
            started.result(_START_TIMEOUT_S)
        except BaseException:
            self._halt()
            raise
        log.info("Kafka listener on %s:%d", self._address[0], self.port)

    async def _bind(self) -> None:
        self._server = await asyncio.start_server(self._accept, *self._address)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        """Closes the listener and every connection; answers still running are dropped."""
        if not self._thread.is_alive():
            return
        stopped: Future[None] = asyncio.run_coroutine_threadsafe(self._close(), self._loop)
        try:
            stopped.result(_STOP_TIMEOUT_S)
        finally:
            self._halt()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def _halt(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_STOP_TIMEOUT_S)
        if not self._thread.is_alive():
            self._loop.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        task = asyncio.current_task()
        assert task is not None
        if len(self._connections) >= CONNECTIONS_MAX:
            log.warning("Kafka listener: refusing %s, %d connections open", peer, CONNECTIONS_MAX)
            writer.close()
            return
        self._connections.add(task)
        try:
            await self._serve(reader, writer, str(peer[0]))
        finally:
            self._connections.discard(task)
            writer.close()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str
    ) -> None:
        answers: asyncio.Queue[_Answer | None] = asyncio.Queue(IN_FLIGHT_MAX)
        sender = asyncio.create_task(_send_in_order(answers, writer, host))
        try:
            await self._read_requests(reader, answers, host)
            await answers.put(None)
            await sender
        finally:
            sender.cancel()

    async def _read_requests(
        self, reader: asyncio.StreamReader, answers: asyncio.Queue[_Answer | None], host: str
    ) -> None:
        """Queues an answer per request until the stream ends or a frame closes it."""
        while (frame := await self._read_frame(reader, host)) is not None:
            try:
                call = self._dispatcher.decode(frame)
            except FrameError as error:
                log.warning("Kafka listener: closing %s: %s", host, error)
                return
            answer = self._loop.run_in_executor(
                self._pool, self._dispatcher.answer, call, self._services, host
            )
            await answers.put(answer)

    async def _read_frame(self, reader: asyncio.StreamReader, host: str) -> bytes | None:
        """The next frame's bytes; None at end of stream or for a size Kafka refuses."""
        try:
            (size,) = SIZE.unpack(await reader.readexactly(SIZE.size))
            if not 0 <= size <= self._request_bytes_max:
                log.warning(
                    "Kafka listener: closing %s: a %d-byte frame (socket.request.max.bytes %d)",
                    host,
                    size,
                    self._request_bytes_max,
                )
                return None
            return await reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None


async def _send_in_order(
    answers: asyncio.Queue[_Answer | None], writer: asyncio.StreamWriter, host: str
) -> None:
    """Writes each answer as it completes, oldest first, until None. A failed handler or write
    closes the connection (the reader then sees its end); later answers are dropped."""
    broken = False
    while (answer := await answers.get()) is not None:
        if broken:
            answer.cancel()
            continue
        try:
            frame = await answer
            if isinstance(frame, FetchFrame):
                await _send_frame(writer, frame)
            elif frame is not None:
                writer.write(frame)
                await writer.drain()
        except ConnectionError:
            broken = True
        except Exception:
            log.exception("Kafka listener: a handler failed, closing %s", host)
            broken = True
        if broken:
            writer.close()


async def _send_frame(writer: asyncio.StreamWriter, frame: FetchFrame) -> None:
    """Writes the framing bytes and sends each file range from the page cache to the socket
    (sendfile), then closes the frame's ranges. ConnectionError if a range came out short (an
    unclean election truncated it under us): the client cannot resynchronise the stream."""
    try:
        for part in frame.parts:
            if isinstance(part, bytes):
                writer.write(part)
            else:
                await _send_range(writer, part)
        await writer.drain()
    finally:
        frame.close()


async def _send_range(writer: asyncio.StreamWriter, part: FileRange) -> None:
    """`loop.sendfile` with the range's explicit offset (its file position, shared with the
    segment's descriptor, is never read: the log reads with pread and appends in append mode);
    where the transport cannot sendfile (TLS, a loop without it), the bytes read with pread."""
    loop = asyncio.get_running_loop()
    with os.fdopen(part.fd, "rb", closefd=False) as file:
        try:
            sent = await loop.sendfile(
                writer.transport, file, part.position, part.length, fallback=False
            )
        except asyncio.SendfileNotAvailableError:
            data = part.read()
            writer.write(data)
            sent = len(data)
    if sent != part.length:
        raise ConnectionError(f"sent {sent} of a {part.length}-byte range: the file shrank")
