"""A cancel that lands while the engine stops still ends the session, and what the worker
made meanwhile does not land on it: an application that asked to cancel never receives the
text, and a cancelled session's text never changes after its cancel."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from inference.decode import StopInfo
from reviewer import lifecycle
from reviewer.models import AuditRecord, Edit, ReviewSession
from reviewer.worker import pause_flags, runtime
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db(transaction=True)


class Unwatched:
    """A flag watcher that watches nothing: the control reads Redis when asked."""

    failing_since = None

    def register(self, control: object) -> None:
        pass

    def unregister(self, control: object) -> None:
        pass


def test_a_cancel_asked_after_the_engine_stopped_still_wins_the_end(alice):
    """The engine ended the run and the worker read no cancel; the application's cancel was
    accepted before the end was recorded: the end must not approve or keep the text."""
    session = make_session(alice, status=ReviewSession.RUNNING)
    control = pause_flags.RedisControl(session.pk, Unwatched())  # type: ignore[arg-type]
    report = runtime.stop_report(None, StopInfo("eos", position=3), control, halted_at=None)  # type: ignore[arg-type]
    pause_flags.request_cancel(session.pk)  # the cancel command, holding the row, sets it
    try:
        assert lifecycle.record_stop(session, report) == "cancel"
    finally:
        pause_flags.clear(session.pk)
    session.refresh_from_db()
    assert session.status == ReviewSession.CANCELLED


def test_the_worker_applies_no_edit_to_a_session_cancelled_meanwhile(
    alice, paused_with_pending_edit, monkeypatch
):
    session = paused_with_pending_edit
    saved: list[int] = []
    # The engine's part of the edit, as far as this test needs it: it changed the state.
    monkeypatch.setattr(runtime, "apply_edit", lambda state, edit: SimpleNamespace(token_start=0))
    signals = SimpleNamespace(alternatives=[])
    monkeypatch.setattr(runtime, "engine", lambda: SimpleNamespace(signals=lambda s: signals))
    monkeypatch.setattr(runtime.events, "edit_report", lambda *args: {})
    monkeypatch.setattr(runtime, "save_record", lambda s, state: saved.append(s.pk))
    state = SimpleNamespace(
        detok=SimpleNamespace(pieces=lambda start: []),
        top1_history=[],
        entropy_history=[],
        similarity_history=[],
    )
    lifecycle.cancel(alice, session.pk)  # while the edit is on its way to the worker
    assert runtime.apply_pending_edits(session, state) is None  # type: ignore[arg-type]
    edit = Edit.objects.get(session=session)
    assert not edit.applied and "ended before this edit was applied" in edit.error
    assert saved == []
    session.refresh_from_db()
    assert session.status == ReviewSession.CANCELLED
    actions = list(AuditRecord.objects.filter(session=session).values_list("action", flat=True))
    assert actions[-2:] == ["cancel", "edit_refused"]
