"""What a server process sets up before it serves: the log format and the signals that stop it.

Controller and broker processes log alike, stop on SIGTERM (a controlled shutdown) or Ctrl-C, and
print every thread's stack on `kill -USR1` (what a stuck shutdown waits on).
"""

from __future__ import annotations

import faulthandler
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Final

LOG_FORMAT: Final = "%(asctime)s %(levelname)s [%(name)s] %(message)s"


def configure_logging() -> None:
    """INFO and above to stderr, each line with its time, level and logger."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)


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
