"""Freeing a finished session's state: the worker that reports the end frees its own memory,
so no task goes back to it; an end decided elsewhere tells the worker that holds the state."""

from __future__ import annotations

import pytest

from reviewer import lifecycle
from reviewer.lifecycle import transitions
from reviewer.models import ReviewSession
from reviewer.worker import dispatch, liveness
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db(transaction=True)

HOLDER = "worker-a:1234"


@pytest.fixture
def told(monkeypatch) -> list[tuple[int, str]]:
    """The release tasks sent, to a worker that is alive."""
    sent: list[tuple[int, str]] = []
    monkeypatch.setattr(liveness, "is_alive", lambda worker: worker == HOLDER)
    monkeypatch.setattr(liveness, "hostname_of", lambda worker: "celery@worker-a")
    monkeypatch.setattr(dispatch, "release", lambda sid, queue: sent.append((sid, queue)))
    return sent


def test_it_sends_no_release_task_to_the_worker_that_reported_the_end(alice, told):
    session = make_session(alice, status=ReviewSession.RUNNING, worker=HOLDER)
    lifecycle.record_stop(session, lifecycle.StopReport(reason="cancel", position=5))
    session.refresh_from_db()
    assert session.status == ReviewSession.CANCELLED
    assert told == []


def test_it_tells_the_holder_when_the_end_is_decided_elsewhere(alice, told):
    session = make_session(alice, status=ReviewSession.PAUSED, worker=HOLDER)
    with transitions.transaction.atomic():
        transitions.finish(session, ReviewSession.CANCELLED)
    assert told == [(session.pk, "celery@worker-a")]
