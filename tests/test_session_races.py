"""What keeps two processes that share a session from stepping on each other."""

import pytest

from reviewer import lifecycle
from reviewer.lifecycle import review
from reviewer.lifecycle.record import StoredRecord
from reviewer.models import ReviewSession
from reviewer.web.health import redis_client
from reviewer.worker import pause_flags
from tests.session_factory import make_session, stub_worker

pytestmark = pytest.mark.django_db


def test_it_stops_a_superseded_segment_from_writing(alice):
    session = make_session(alice, status=ReviewSession.RUNNING, segment="old")
    stale = ReviewSession.objects.get(pk=session.pk)
    ReviewSession.objects.filter(pk=session.pk).update(segment="new")
    with pytest.raises(lifecycle.SegmentSuperseded):
        lifecycle.store_record(stale, StoredRecord([1, 2, 3], "overwritten", {}))
    session.refresh_from_db()
    assert session.generated_ids == [11, 12, 13, 14, 15] and session.text != "overwritten"


def test_it_lets_the_owning_segment_write(alice):
    session = make_session(alice, status=ReviewSession.RUNNING, segment="mine")
    lifecycle.store_record(session, StoredRecord([1, 2, 3], "written", {"attempt": 0}))
    session.refresh_from_db()
    assert (session.generated_ids, session.text) == ([1, 2, 3], "written")


def test_it_forgets_an_overtaken_pause_request_when_resuming(
    alice, monkeypatch, django_capture_on_commit_callbacks
):
    stub_worker(monkeypatch)
    session = make_session(alice)
    pause_flags.request_pause(session.pk)  # asked while running; a policy pause came first
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.resume(alice, session.pk)
    assert redis_client().get(pause_flags.control_key(session.pk)) is None


def test_it_does_not_redispatch_a_session_no_worker_has_claimed_yet(alice):
    queued = make_session(alice, status=ReviewSession.RUNNING, worker="")
    orphan = make_session(alice, status=ReviewSession.RUNNING, worker="gone@host")
    alive = make_session(alice, status=ReviewSession.RUNNING, worker="alive@host")
    assert lifecycle.orphaned_sessions({"alive@host"}) == [(orphan.pk, "gone@host")]
    assert queued.pk != alive.pk


@pytest.mark.django_db(transaction=True)
def test_the_same_command_id_sent_twice_at_once_runs_once_and_answers_both(alice, monkeypatch):
    import threading
    import time

    from django.db import connection

    from reviewer.models import AuditRecord

    stub_worker(monkeypatch)
    session = make_session(alice, status=ReviewSession.PAUSED)
    summary = lifecycle.summary

    def slow_summary(s):  # hold the first request inside its transaction for a while
        time.sleep(0.4)
        return summary(s)

    monkeypatch.setattr(review, "summary", slow_summary)
    answers: list = []

    def send() -> None:
        try:
            answers.append(lifecycle.resume(alice, session.pk, command_id="twice"))
        except Exception as exc:  # the assertion below names it
            answers.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
        time.sleep(0.1)  # the second arrives while the first is still running
    for thread in threads:
        thread.join(timeout=10)
    assert all(isinstance(a, dict) for a in answers), answers
    assert sorted(bool(a.get("repeated")) for a in answers) == [False, True]
    assert AuditRecord.objects.filter(session=session, action="resume").count() == 1
