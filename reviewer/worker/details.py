"""A pause's details, read from the frozen state after the pause itself was reported.

The pause (status, reason, alternatives, history) is stored and sent at the engine's halt, so
the reviewer can act at once. What takes longer follows as events of its own: the look-ahead
branches, the attention at the pause and the snapshot in the vault (after an edit at a pause,
the same for the edited state). One thread per worker process reads them, in order. Each read
is a serving-loop call that first checks the state is still the one paused: a resume or an
edit since makes the rest stale, and it is skipped. The look-ahead's forwards are read one a
turn (``call_in_slices``): a pause, an edit or any session's step waits for one forward at
most. So nothing a reviewer does waits for more than the one detail being read, and nothing
they sent meanwhile is lost: edits and resumes are segments of their own, applied in order
by the loop.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection

from inference.serving import ServingLoop, Slices
from inference.state import DecodeState
from reviewer import events, lifecycle
from reviewer.models import ReviewSession

log = logging.getLogger(__name__)

LOOKAHEAD_STEPS = 5  # tokens each previewed branch shows


class Stale(Exception):
    """The state moved on since the pause (resumed, edited): its details are not wanted."""


@dataclass(frozen=True)
class Job:
    session: ReviewSession
    state: DecodeState
    of: dict[str, Any]  # events.detail_of(): the pause (and edit) the details belong to
    ids: tuple[int, ...]  # the generated ids when it was reported
    candidates: tuple[int, ...]  # the alternatives' token ids to look ahead from
    epoch: int  # the session's epoch when it was reported (see Describer.supersede)


class Describer:
    """Reads paused states' details on its own thread; ``keep`` stores a snapshot in the
    vault and says whether it was kept (not when the session ended meanwhile)."""

    def __init__(
        self, loop: Callable[[], ServingLoop], keep: Callable[[ReviewSession, bytes], bool]
    ) -> None:
        self.loop, self.keep = loop, keep
        self._jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self._epochs: dict[int, int] = {}  # by session, while this process keeps its state
        # Never given twice: a job queued before its session's entry went stays stale after.
        self._next_epoch = itertools.count(1)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def supersede(self, session_id: int) -> int:
        """A new segment began for the session: details read before it are stale."""
        with self._lock:
            self._epochs[session_id] = next(self._next_epoch)
            return self._epochs[session_id]

    def forget(self, session_id: int) -> None:
        """The session's state was dropped here: details queued for it are stale."""
        with self._lock:
            self._epochs.pop(session_id, None)

    def epoch(self, session_id: int) -> int:
        with self._lock:
            return self._epochs.get(session_id, 0)

    def describe(
        self, session: ReviewSession, state: DecodeState, of: dict[str, Any], candidates: list[int]
    ) -> None:
        """Queue the details of the pause ``of`` names, as ``state`` is now."""
        with self._lock:
            epoch = self._epochs.get(session.pk, 0)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._work, name="pause-details", daemon=True
                )
                self._thread.start()
        ids, alternatives = tuple(state.generated_ids), tuple(candidates)
        self._jobs.put(Job(session, state, of, ids, alternatives, epoch))

    # ---- the describer's thread ----------------------------------------------------------
    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                self._run(job)
            except Stale:
                pass
            except Exception:  # a detail is never worth more than a line in the log
                log.exception("session %s: the pause's details failed", job.session.pk)
            finally:
                connection.close()  # between jobs: a long idle connection may have gone

    def _run(self, job: Job) -> None:
        self._look_ahead(job)
        self._attention(job)
        self._snapshot(job)

    def _look_ahead(self, job: Job) -> None:
        started = time.perf_counter()
        candidates = list(job.candidates)
        try:
            branches = self._read_in_slices(
                job, lambda eng: eng.look_ahead_in_slices(job.state, candidates, LOOKAHEAD_STEPS)
            )
        except (RuntimeError, ValueError) as exc:  # a preview is never worth losing the pause
            log.warning("look-ahead failed (%s); the pause shows no previews", exc)
            branches = []
        ms = round((time.perf_counter() - started) * 1000, 1)
        detail = events.lookahead(job.of, [b.to_dict() for b in branches], ms)
        lifecycle.record_pause_detail(job.session.pk, events.LOOKAHEAD, detail)

    def _attention(self, job: Job) -> None:
        view = self._read(job, lambda eng: eng.attention(job.state).to_dict())
        detail = events.pause_attention(job.of, view)
        lifecycle.record_pause_detail(job.session.pk, events.PAUSE_ATTENTION, detail)

    def _snapshot(self, job: Job) -> None:
        started = time.perf_counter()
        data = self._read(job, lambda eng: eng.snapshot(job.state))
        if not self.keep(job.session, data):
            return
        ms = round((time.perf_counter() - started) * 1000, 1)
        detail = events.snapshot(job.of, len(data), ms)
        lifecycle.record_pause_detail(job.session.pk, events.SNAPSHOT, detail)

    def _read(self, job: Job, read: Callable[[Any], Any]) -> Any:
        """``read(engine)`` in the serving loop, if the state is still the one paused."""
        self._check(job)

        def unless_stale(engine: Any) -> Any:
            self._check(job)
            return read(engine)

        value = self.loop().call(unless_stale)
        self._check(job)  # a resume that came during the read makes it stale too
        return value

    def _read_in_slices(self, job: Job, read: Callable[[Any], Slices]) -> Any:
        """``_read`` for a read in slices: the sessions step between them, and a resume or an
        edit that came meanwhile ends the read at the next slice."""
        self._check(job)

        def unless_stale(engine: Any) -> Slices:
            slices = read(engine)
            while True:
                self._check(job)
                try:
                    next(slices)
                except StopIteration as done:
                    return done.value
                yield

        value = self.loop().call_in_slices(unless_stale)
        self._check(job)
        return value

    def _check(self, job: Job) -> None:
        if self.epoch(job.session.pk) != job.epoch or tuple(job.state.generated_ids) != job.ids:
            raise Stale
