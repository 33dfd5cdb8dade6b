"""A generating segment's relay: the engine's events to Postgres and the session's group,
off the serving loop's thread.

The serving loop steps every session of this worker, so its thread must never wait on a
database or a broker: the engine calls the relay there (the sink), and each call only queues
what happened, with a copy of the checkpoint when one is due. The relay's own thread (one of
reviewer/worker/relay_threads.py's, kept with its connections from one segment to the next)
writes them in order, then reports the stop (or the failure), so a session's records keep the
order the engine produced them in. A write that fails (the segment superseded, Redis out of reach
past its grace) ends the generation at its next token.

A gateway generation's relay writes its tokens in runs (``Batching``): each write costs a
statement, a broadcast and a wake of every follower, on cores the model keeps busy, and nobody
needs such a generation's tokens one by one (its text leaves by sentences or after review),
unless a reviewer's page follows it (reviewer/events/watching.py): then each token goes at
once, as for a session a reviewer started. The first token of a run waits a little for the
rest, except the segment's first: it is written at once, so that what is stored tells when the
generation began to produce (its start, and a resume, are visible at once; benchmarks time the
delay from it). A token that lets delayed delivery send more text (its boundary moves: the first word
of a sentence after a complete one, by the rule the gateway releases by) and anything that is
not a token (a flag, a rollback, the stop) are written at once; the text such a token
releases is locked for the application in the same commit (its ``released``), so that the
stream sends it as it arrives, with no statement of its own on the way.

While a run is held the engine does not wake the relay's thread for each token: it decides
itself (``on_token``) when a write is due (the run whole, text to release, anything else, a
page following) and wakes it then; the thread also wakes when the hold runs out and every
WATCH_CHECK_S to ask whether a page follows. A thread woken for every token preempted the
model's threads on a busy worker (eight sessions: about 150 times a second, against 50 in the
serving loop alone).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, connection

from inference.decode import StopInfo
from inference.sentences import SentenceTracker, delayed_boundary
from inference.sink import FlagEvent, PauseNotice, RollbackEvent, Sink, TokenEvent
from inference.state import DecodeState
from reviewer import events, lifecycle
from reviewer.analytics import metrics
from reviewer.lifecycle.record import StoredRecord
from reviewer.models import ReviewSession
from reviewer.worker import failures, relay_threads, unrecorded_failures

log = logging.getLogger(__name__)

CHECKPOINT_EVERY = 32  # tokens between writes of the token ids to Postgres
MAX_BATCH = 64  # queued items taken at once: a run of tokens among them is one write
JOIN_WAIT_S = 120  # the longest a next segment waits for this one's report
ENDS = ("stop", "error")  # the last item a relay takes
WATCH_CHECK_S = 0.25  # how old the relay's answer to "does a page follow it?" may be
# Waits before each try at recording a failure, the first on the connection in hand, the next
# at once on a new one (Postgres was back, the connection was not), then over about a minute.
FAIL_RETRY_S = (0.0, 0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)

Checkpoint = tuple[list[int], str, dict[str, Any]]  # generated ids, text, meta: what services store
# How much of the final text may leave at once when a run ends this way (its stop, its state):
# a delayed gateway generation that the system approves on its end; None: it waits for the
# end's record (reviewer/worker/request.py ``final_release``).
Ending = Callable[[StopInfo, DecodeState], int | None]


def gate_hit_rate(event: TokenEvent) -> float | None:
    """The share of the attention mass a gated step kept, on the steps the engine measured."""
    for holder in (event, event.signals):
        rate = getattr(holder, "gate_hit_rate", None)
        if rate is not None:
            return float(rate)
    return None


@dataclass(frozen=True)
class Batching:
    """How a relay writes its tokens: in runs of up to ``tokens``, the first of a run held at
    most ``hold_s`` for the rest; one token: each as it comes. ``delay_sentences`` and
    ``stops``: delayed delivery's, so that a token that lets more text leave goes at once,
    with that text locked; None: no text leaves while the generation runs (it waits for
    review)."""

    tokens: int = 1
    hold_s: float = 0.0
    delay_sentences: int | None = None
    stops: tuple[str, ...] = ()


EACH_AT_ONCE = Batching()


def tokens_in(items: list[tuple[str, Any]]) -> int:
    return sum(kind == "token" for kind, _ in items)


class Aborted(Exception):
    """The relay could not write what the engine produced; the run stops here."""


class Relay(Sink):
    def __init__(
        self,
        session: ReviewSession,
        state: DecodeState | None,
        capture: Callable[[DecodeState], StoredRecord],
        finish: Callable[[StopInfo, float | None, PauseNotice | None], Any],
        loop_timing: Mapping[str, float] | None = None,
        batching: Batching = EACH_AT_ONCE,
        watched: Callable[[], bool] = lambda: False,
        ending: Ending = lambda stop, state: None,
    ) -> None:
        self.session, self.state = session, state
        self.ending = ending  # asked from the relay's thread, once, as the run ends
        self.batching = batching
        self.watched = watched  # asked from the relay's thread only, at most every WATCH_CHECK_S
        self._watched_answer, self._watched_asked = False, float("-inf")
        self.capture, self.finish = capture, finish
        self.since_checkpoint = 0
        self.step_timer = metrics.StepTimer()
        self.domain = session.domain.slug  # the gate's hit rate is exported by domain
        self.failed: BaseException | None = None  # set by the relay's thread
        self.stored: StoredRecord | None = None  # the last record written (the relay's thread)
        self.halted_at: float | None = None  # when the run ended, for the pause's latency
        # The serving loop's turn and step that ended the run (ServingLoop.timing), copied then
        self.loop_timing = loop_timing
        self.halt_timing: dict[str, float] = {}
        self.notice: PauseNotice | None = None  # what the engine said of its pause, if it paused
        self._queue: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._due = threading.Event()  # set by the engine's thread: a held run is to be written
        self._holding = False  # the relay's thread waits for ``_due``: what is queued is held
        self._done: Callable[[], Any] = lambda: None
        self._queued = self._written = 0  # tokens; each counter has one writing thread
        # Tokens the relay's thread took and holds for the rest of their run: not behind, so the
        # loop does not wait for them (backlog).
        self._held = 0
        # The generated text as the engine reported it, its sentences, and how much of it
        # delayed delivery could send: a token that moves that is written at once.
        self._text = state.text if state is not None else ""
        self._sentences = SentenceTracker()
        self._boundary = self._releasable()
        self._release_due = False  # a token taken for the next write lets more text leave
        # (the relay's thread)
        self._finished = threading.Event()  # the stop reported, ``done`` called

    # ---- the serving loop's thread: queue only -------------------------------------------
    def started(self, state: DecodeState) -> None:
        """A new session's state, just prefilled: its prompt ids are stored first."""
        self.state = state
        self._put(("prompt", list(state.prompt_ids)))

    def on_token(self, event: TokenEvent) -> None:
        self._go_on()
        self.step_timer.tick()
        metrics.gate_hit(self.domain, gate_hit_rate(event))
        self._queued += 1
        released = self._released_by(event)
        self._queue.put(("token", (event, released)))
        runs = self.batching.tokens > 1
        if runs and (released is not None or self._run_whole() or self._watched_answer):
            self._due.set()
        self.since_checkpoint += 1
        if self.since_checkpoint >= CHECKPOINT_EVERY:
            self._checkpoint()

    def _run_whole(self) -> bool:
        return self._queued - self._written >= self.batching.tokens

    def _put(self, item: tuple[str, Any]) -> None:
        """Anything but a token: written at once, after the tokens queued before it."""
        self._queue.put(item)
        self._due.set()

    def on_flag(self, event: FlagEvent) -> None:
        self._go_on()
        self._put(("flag", event))

    def on_pause(self, event: PauseNotice) -> None:
        self.notice = event  # read by the relay's thread after the stop, queued after this

    def on_rollback(self, event: RollbackEvent) -> None:
        self._go_on()
        self._put(("rollback", event))
        self._checkpoint()  # the ids shrank: recovery must not replay the removed tokens

    def backlog(self) -> int:
        """Tokens the page has not been sent yet (the loop paces itself to it)."""
        if self.failed is not None or self._holding:
            return 0
        return self._queued - self._written - self._held

    def _checkpoint(self) -> None:
        assert self.state is not None, "tokens come after the state is made"
        self._put(("record", self.capture(self.state)))
        self.since_checkpoint = 0

    def _go_on(self) -> None:
        if self.failed is not None:
            raise Aborted(f"session {self.session.pk}: its events cannot be stored") from None

    # ---- any thread ----------------------------------------------------------------------
    def follow(self, run: Future[StopInfo], done: Callable[[], Any] = lambda: None) -> None:
        """Start writing; the run's end (a stop or an error) is reported after its events,
        then ``done`` is called."""
        self._done = done
        relay_threads.threads.run(f"relay-session-{self.session.pk}", self._work)
        run.add_done_callback(self._ended)

    def _ended(self, run: Future[StopInfo]) -> None:
        """In the loop's thread, as the run ends: the moment the session halted."""
        self.halted_at = time.time()  # read by the relay's thread after the item below
        self.halt_timing = dict(self.loop_timing or {})
        error = run.exception()
        self._put(("error", error) if error is not None else ("stop", run.result()))

    def join(self) -> None:
        if not self._finished.wait(JOIN_WAIT_S):
            log.warning("session %s: the previous segment is still reporting", self.session.pk)

    # ---- the relay's thread --------------------------------------------------------------
    def _work(self) -> None:
        try:
            while (items := self._take())[-1][0] not in ("stop", "error"):
                self._write_all(items)
            self._write_all(self._before_end(items))
            if self.failed is None:
                self._report_end(*items[-1])
        except Exception as exc:  # a bug here: the run ends with the session failed, not stalled
            self.failed = exc
            self._record_failure(exc)
        finally:
            try:
                self._done()
            finally:
                self._finished.set()

    def _take(self) -> list[tuple[str, Any]]:
        """What the engine queued since the last write (waiting for one item), in order; the
        end of the run (a stop or an error) comes last, never followed by anything."""
        items: list[tuple[str, Any]] = []
        self._release_due = False
        item: tuple[str, Any] | None = self._queue.get()
        until = time.monotonic() + self.batching.hold_s  # the longest the first token waits
        while item is not None:
            items.append(self._taken(item))
            if item[0] in ENDS or len(items) >= MAX_BATCH:
                break
            item = self._next(items, until)
        self._held = tokens_in(items) if self._holding else 0  # a run's tokens, until written
        self._holding = False
        return items

    def _next(self, items: list[tuple[str, Any]], until: float) -> tuple[str, Any] | None:
        """The next item queued; while the run holds, waiting until the engine says a write
        is due, the hold runs out, or it is time to ask again whether a page follows. None:
        write what was taken."""
        while True:
            try:
                return self._queue.get_nowait()
            except queue.Empty:
                pass
            if not self._holds(items, until):
                return None
            self._held, self._holding = tokens_in(items), True
            # The hold may have run out since _holds looked (it may ask Redis).
            wake = min(until, self._watched_asked + WATCH_CHECK_S)
            self._due.wait(max(0.0, wake - time.monotonic()))
            self._due.clear()  # before the queue is read again: no wake is lost

    def _taken(self, item: tuple[str, Any]) -> tuple[str, Any]:
        """An item as it will be written. A token is encoded as it is taken: a held run's at
        each of the relay's wakes while it waits for the rest, not all in the write that the
        run's end (often the generation's, eight at once on a busy worker) then waits for."""
        kind, payload = item
        if kind != "token":
            return item
        event, released = payload
        body = events.token(event)
        if released is not None:
            self._release_due = True
            body["released"] = released
        return kind, events.Encoded(body)

    def _holds(self, items: list[tuple[str, Any]], until: float) -> bool:
        """Whether to wait for more before writing: only after tokens, until the run is whole
        or its time is up; not when one of them lets delayed delivery send more text, not while
        a reviewer's page follows the session, and never for the segment's first token."""
        return (
            items[-1][0] == "token"
            and self._written > 0
            and not self._release_due
            and tokens_in(items) < self.batching.tokens
            and time.monotonic() < until
            and not self._followed()
        )

    def _followed(self) -> bool:
        now = time.monotonic()
        if now - self._watched_asked >= WATCH_CHECK_S:
            self._watched_answer, self._watched_asked = self.watched(), now
        return self._watched_answer

    def _released_by(self, event: TokenEvent) -> int | None:
        """Where a token (the engine's thread reports each once, in order) moves delayed
        delivery's boundary, the new boundary: the text up to it may leave once the token is
        stored (reviewer/gateway/delivery.py, by the same rule), and is locked with it. None:
        it lets no more text leave."""
        if self.batching.delay_sentences is None:
            return None
        self._text = self._text[: event.text_offset] + event.text  # a rollback: starts earlier
        boundary = self._releasable()
        moved, self._boundary = boundary > self._boundary, boundary
        return boundary if moved else None

    def _releasable(self) -> int:
        rule = self.batching
        if rule.delay_sentences is None:
            return 0
        sentences = self._sentences.complete_sentences(self._text)
        return delayed_boundary(self._text, rule.delay_sentences, rule.stops, sentences)

    def _before_end(self, items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """What is written before the end is reported (all but the end): its last token marked
        with how much of the final text may leave at once, where ``ending`` says so."""
        body, (kind, stop) = items[:-1], items[-1]
        if kind != "stop" or not body or body[-1][0] != "token" or self.state is None:
            return body
        chars = self.ending(stop, self.state) if self.failed is None else None
        if chars is None:
            return body
        last = events.Encoded({**body[-1][1], "released": chars})
        return [*body[:-1], ("token", last)]

    def _write_all(self, items: list[tuple[str, Any]]) -> None:
        """Each run of tokens in one statement and one broadcast call, everything else as it
        comes: a relay that fell behind catches up without a round trip per token."""
        for kind, group in itertools.groupby(items, key=lambda item: item[0]):
            batch = [payload for _, payload in group]
            if self.failed is None:
                if kind == "token":
                    self._write("tokens", batch)
                else:
                    for payload in batch:
                        self._write(kind, payload)
            if kind == "token":
                self._written += len(batch)
        self._held = 0

    def _write(self, kind: str, payload: Any) -> None:
        try:
            if kind == "tokens" and any("released" in token for token in payload):
                lifecycle.record_released_tokens(self.session, payload)
            elif kind == "tokens":
                # lifecycle.record_token, for many: a token is an event and nothing else.
                events.emit_many(self.session.pk, events.TOKEN, payload)
            elif kind == "flag":
                lifecycle.record_flag(self.session, events.flag(payload))
            elif kind == "rollback":
                lifecycle.record_rollback(self.session, events.rollback(payload))
            elif kind == "prompt":
                lifecycle.record_prompt(self.session, payload)
            else:
                lifecycle.store_record(self.session, payload)
                self.stored = payload
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
            record_failure(self.session.pk, failures.describe(exc), self.session.segment)
        except Exception:  # a bug in recording it: the log is all that is left
            log.exception("session %s: the failure could not be recorded", self.session.pk)


def record_failure(session_id: int, error: str, segment: str | None) -> bool:
    """``lifecycle.fail`` on a new connection while Postgres is out of reach: the one in hand
    may be what broke, and Django opens another only between tasks. Its worker lives on, so
    no sweep would take back a session left running. False: not recorded within about a
    minute; the heartbeat tries again until it is (reviewer/worker/unrecorded_failures.py)."""
    for wait in FAIL_RETRY_S:
        time.sleep(wait)
        try:
            lifecycle.fail(session_id, error, segment)
            return True
        except (OperationalError, InterfaceError) as exc:
            if connection.in_atomic_block:
                raise  # the caller's transaction (a task applied eagerly): not ours to drop
            log.warning("session %s: recording its failure failed (%s)", session_id, exc)
            with contextlib.suppress(DatabaseError):  # broken: closing it may fail too
                connection.close()
    log.error(
        "session %s: its failure could not be recorded yet; it shows as running until the"
        " worker's heartbeat records it",
        session_id,
    )
    unrecorded_failures.keep(session_id, error, segment)
    return False
