"""Progress of a long start (a compile): said in the log while it runs, so that a first start
that takes minutes does not look hung."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 15.0  # how often a long compile says it is still at work


@contextlib.contextmanager
def progress(what: str) -> Iterator[None]:
    """Logs ``what`` at the start, every PROGRESS_EVERY_S while it runs, and its time."""
    started, done = time.monotonic(), threading.Event()

    def remind() -> None:
        while not done.wait(PROGRESS_EVERY_S):
            log.info("%s: still at it, %.0f s", what, time.monotonic() - started)

    log.info("%s ...", what)
    reminder = threading.Thread(target=remind, name="caesura-compile-progress", daemon=True)
    reminder.start()
    try:
        yield
    finally:
        done.set()
        log.info("%s: done in %.1f s", what, time.monotonic() - started)
