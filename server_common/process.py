"""What a server process sets up before it serves: the log format, the signals that stop it and
its file descriptor limit.

Controller and broker processes log alike, stop on SIGTERM (a controlled shutdown) or Ctrl-C, and
print every thread's stack on `kill -USR1` (what a stuck shutdown waits on) and on a fatal error.
With `log.format=json` each log line is one JSON object (`time` in ISO 8601 UTC, `level`,
`logger`, `message`, `thread`, and `exception` when there is one) for log collectors; `text` (the
default) is for people. Each server raises its soft RLIMIT_NOFILE to the hard limit at start
(`raise_open_files_limit`), as the JVM does for Kafka: the soft default (often 1024) is far below
what a broker with thousands of partitions and connections needs. How servers keep the garbage
collector's pauses short is `gc_pauses`'.
"""

from __future__ import annotations

import datetime
import faulthandler
import json
import logging
import resource
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Final

from pykraft.server_common.config_files import ConfigError

LOG_FORMAT: Final = "%(asctime)s %(levelname)s [%(name)s] %(message)s"
LOG_FORMAT_KEY: Final = "log.format"
LOG_FORMATS: Final = ("text", "json")


def parse_log_format(text: object) -> str:
    """`log.format`'s value, one of LOG_FORMATS; ConfigError otherwise."""
    value = str(text).strip().lower()
    if value not in LOG_FORMATS:
        raise ConfigError(f"{LOG_FORMAT_KEY} must be one of {', '.join(LOG_FORMATS)}, got {text!r}")
    return value


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (json.dumps escapes newlines in messages)."""

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        fields = {
            "time": moment.isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "thread": record.threadName,
        }
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        return json.dumps(fields)


def configure_logging(log_format: str = "text") -> None:
    """INFO and above to stderr, each line with its time, level and logger: as text, or as one
    JSON object with `log_format` "json" (any other value is a caller's bug). A fatal error (a
    crash in a C extension) prints every thread's stack to stderr too (faulthandler), so a node
    that dies that way leaves more than an empty log."""
    assert log_format in LOG_FORMATS, log_format
    faulthandler.enable(all_threads=True)
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(LOG_FORMAT))
    logging.basicConfig(level=logging.INFO, handlers=[handler])


def stop_on_signals(on_stop: Callable[[], None] | None = None) -> threading.Event:
    """An event set by SIGTERM or SIGINT, after which `on_stop` runs on the signal's thread (to
    interrupt a start-up, say); SIGUSR1 prints every thread's stack from then on. Call it from
    the main thread, as Python's signal handlers require."""
    stopped = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopped.set()
        if on_stop is not None:
            on_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    return stopped


def raise_open_files_limit() -> int:
    """Raises this process's soft limit on open files to its hard limit; returns the limit now
    in force (an unlimited hard limit leaves the soft one as it is)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft
