"""The threads relays write on, kept from one segment to the next.

A relay writes from a thread of its own (reviewer/worker/relay.py). A new thread for each
segment also opened a new Postgres connection (about 5 ms, and a new server process) and a
new event loop with its Redis connection for the broadcasts, in the first step of every
generation, on cores the model keeps busy. A thread here serves one relay at a time and then
waits for the next, keeping both; before each relay it drops a connection that has gone stale
or broken, as a request does. A thread idle for a minute closes both (a burst of sessions
must not keep its connections open for ever) and opens them again for its next relay.

The threads are daemons, as the relays' own threads were: a run that never reported its end
does not hold up the worker's exit. They are as many as relays ever wrote at once.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections.abc import Callable

from django.db import close_old_connections, connection

from reviewer.events import layer_loop

log = logging.getLogger(__name__)

Job = Callable[[], None]
IDLE_CLOSE_S = 60.0  # an idle thread closes its connections after this long


class RelayThreads:
    def __init__(self) -> None:
        # The most recently idle first: its connections are the freshest, and the threads a
        # burst left over stay idle long enough to close theirs.
        self._idle: queue.LifoQueue[queue.SimpleQueue[tuple[str, Job]]] = queue.LifoQueue()

    def run(self, name: str, job: Job) -> None:
        """Run ``job`` on an idle thread, or on a new one when none is idle; ``name`` names
        the thread while it runs (logs, profiles)."""
        try:
            inbox = self._idle.get_nowait()
        except queue.Empty:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), daemon=True).start()
        inbox.put((name, functools.partial(checked_first, job)))

    def idle(self) -> int:
        return self._idle.qsize()

    def release_idle(self) -> None:
        """Close the connections of the threads idle now (the database they use is about to
        go, as a test run's at its end)."""
        idle = []
        while True:  # all of them first: each comes back idle after closing
            try:
                idle.append(self._idle.get_nowait())
            except queue.Empty:
                break
        done = [threading.Event() for _ in idle]
        for inbox, closed in zip(idle, done, strict=True):
            inbox.put(("relay-idle", functools.partial(close_connections, closed)))
        for closed in done:
            closed.wait(10)

    def _serve(self, inbox: queue.SimpleQueue[tuple[str, Job]]) -> None:
        while True:
            try:
                name, job = inbox.get(timeout=IDLE_CLOSE_S)
            except queue.Empty:
                close_connections()
                name, job = inbox.get()
            threading.current_thread().name = name
            try:
                job()
            except Exception:  # a job reports its own failures; this must not end the thread
                log.exception("%s failed", name)
            finally:
                threading.current_thread().name = "relay-idle"
                self._idle.put(inbox)


def checked_first(job: Job) -> None:
    close_old_connections()  # a stale or broken connection is dropped, as before a request
    job()


def close_connections(closed: threading.Event | None = None) -> None:
    connection.close()
    layer_loop.close()  # the event loop, with the channel layer's connection
    if closed is not None:
        closed.set()


threads = RelayThreads()
