"""A generating segment's relay: the engine's events to Postgres and the session's group,
off the serving loop's thread.

The serving loop steps every session of this worker, so its thread must never wait on a
database or a broker: the engine calls the relay there (the sink), and each call only queues
what happened, with a copy of the checkpoint when one is due. The relay's own thread writes
them in order, then reports the stop (or the failure), so a session's records keep the order
the engine produced them in. A write that fails (the segment superseded, Redis out of reach
past its grace) ends the generation at its next token.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from django.db import connection

from inference.decode import StopInfo
from inference.sink import FlagEvent, PauseNotice, RollbackEvent, Sink, TokenEvent
from inference.state import DecodeState
from reviewer import events, lifecycle
from reviewer.analytics import metrics
from reviewer.lifecycle.record import StoredRecord
from reviewer.models import ReviewSession
from reviewer.worker import failures

log = logging.getLogger(__name__)

CHECKPOINT_EVERY = 32  # tokens between writes of the token ids to Postgres
JOIN_WAIT_S = 120  # the longest a next segment waits for this one's report

Checkpoint = tuple[list[int], str, dict[str, Any]]  # generated ids, text, meta: what services store


class Aborted(Exception):
    """The relay could not write what the engine produced; the run stops here."""


class Relay(Sink):
    def __init__(
        self,
        session: ReviewSession,
        state: DecodeState,
        capture: Callable[[DecodeState], StoredRecord],
        finish: Callable[[StopInfo, float | None, PauseNotice | None], Any],
    ) -> None:
        self.session, self.state = session, state
        self.capture, self.finish = capture, finish
        self.since_checkpoint = 0
        self.step_timer = metrics.StepTimer()
        self.failed: BaseException | None = None  # set by the relay's thread
        self.halted_at: float | None = None  # when the run ended, for the pause's latency
        self.notice: PauseNotice | None = None  # what the engine said of its pause, if it paused
        self._queue: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._done: Callable[[], Any] = lambda: None
        self._queued = self._written = 0  # tokens; each counter has one writing thread
        self._thread = threading.Thread(
            target=self._work, name=f"relay-session-{session.pk}", daemon=True
        )

    # ---- the serving loop's thread: queue only -------------------------------------------
    def on_token(self, event: TokenEvent) -> None:
        self._go_on()
        self.step_timer.tick()
        self._queued += 1
        self._queue.put(("token", event))
        self.since_checkpoint += 1
        if self.since_checkpoint >= CHECKPOINT_EVERY:
            self._checkpoint()

    def on_flag(self, event: FlagEvent) -> None:
        self._go_on()
        self._queue.put(("flag", event))

    def on_pause(self, event: PauseNotice) -> None:
        self.notice = event  # read by the relay's thread after the stop, queued after this

    def on_rollback(self, event: RollbackEvent) -> None:
        self._go_on()
        self._queue.put(("rollback", event))
        self._checkpoint()  # the ids shrank: recovery must not replay the removed tokens

    def backlog(self) -> int:
        """Tokens the page has not been sent yet (the loop paces itself to it)."""
        return 0 if self.failed is not None else self._queued - self._written

    def _checkpoint(self) -> None:
        self._queue.put(("record", self.capture(self.state)))
        self.since_checkpoint = 0

    def _go_on(self) -> None:
        if self.failed is not None:
            raise Aborted(f"session {self.session.pk}: its events cannot be stored") from None

    # ---- any thread ----------------------------------------------------------------------
    def follow(self, run: Future[StopInfo], done: Callable[[], Any] = lambda: None) -> None:
        """Start writing; the run's end (a stop or an error) is reported after its events,
        then ``done`` is called."""
        self._done = done
        self._thread.start()
        run.add_done_callback(self._ended)

    def _ended(self, run: Future[StopInfo]) -> None:
        """In the loop's thread, as the run ends: the moment the session halted."""
        self.halted_at = time.time()  # read by the relay's thread after the item below
        error = run.exception()
        self._queue.put(("error", error) if error is not None else ("stop", run.result()))

    def join(self) -> None:
        self._thread.join(JOIN_WAIT_S)
        if self._thread.is_alive():
            log.warning("session %s: the previous segment is still reporting", self.session.pk)

    # ---- the relay's thread --------------------------------------------------------------
    def _work(self) -> None:
        try:
            while (item := self._queue.get())[0] not in ("stop", "error"):
                if self.failed is None:
                    self._write(*item)
                if item[0] == "token":
                    self._written += 1
            if self.failed is None:
                self._report_end(*item)
        finally:
            connection.close()  # this thread's own connection
            self._done()

    def _write(self, kind: str, payload: Any) -> None:
        try:
            if kind == "token":
                lifecycle.record_token(self.session, events.token(payload))
            elif kind == "flag":
                lifecycle.record_flag(self.session, events.flag(payload))
            elif kind == "rollback":
                lifecycle.record_rollback(self.session, events.rollback(payload))
            else:
                lifecycle.store_record(self.session, payload)
        except lifecycle.SegmentSuperseded as exc:
            self.failed = exc  # a newer segment carries on; nothing failed
        except Exception as exc:
            self.failed = exc
            self._record_failure(exc)

    def _report_end(self, kind: str, payload: Any) -> None:
        try:
            if kind == "stop":
                self.finish(payload, self.halted_at, self.notice)
            elif not isinstance(payload, lifecycle.SegmentSuperseded):
                self._record_failure(payload)
        except lifecycle.SegmentSuperseded:
            pass
        except Exception as exc:
            self._record_failure(exc)

    def _record_failure(self, exc: BaseException) -> None:
        log.error("session %s: segment failed", self.session.pk, exc_info=exc)
        try:
            lifecycle.fail(self.session.pk, failures.describe(exc), self.session.segment)
        except Exception:  # Postgres gone too: the sweep retakes the session once it is back
            log.exception("session %s: the failure could not be recorded", self.session.pk)
