"""Time on resume with the real model in a real worker: after a long pause the model reads the
current time in its context; the reviewer's text never holds it; the audit records it. A short
pause tells nothing and resumes exactly as an uninterrupted run."""

from __future__ import annotations

import time

import pytest

from reviewer import lifecycle
from reviewer.models import AuditRecord, ReviewSession
from tests.conftest import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.django_db(transaction=True)]

PROMPT = "Write a one-line reminder to take blood pressure medicine today."


def session(session_id: int) -> ReviewSession:
    return ReviewSession.objects.get(pk=session_id)


def paused_after_tokens(alice, seed: int) -> int:
    sid = lifecycle.start_session(alice, "Plain", PROMPT, seed=seed, max_new_tokens=24)["id"]
    wait_for(lambda: session(sid).events.filter(type="token").count() >= 3, what="three tokens")
    lifecycle.pause(alice, sid)
    wait_for(lambda: session(sid).status == "paused", what="the pause")
    return sid


def finished(sid: int) -> ReviewSession:
    wait_for(lambda: session(sid).status == "generated", timeout=120, what="the end")
    return session(sid)


def test_a_long_pause_tells_the_model_the_time(celery_worker_process, alice, plain_domain):
    plain_domain.resume_time_after_s = 1
    plain_domain.save()
    sid = paused_after_tokens(alice, seed=3)
    position = session(sid).pauses.get().position
    time.sleep(1.5)
    lifecycle.resume(alice, sid)
    done = finished(sid)
    told = AuditRecord.objects.get(session_id=sid, action="time_told").payload
    assert told["text"].startswith(" (Current time: ") and told["position"] == position
    assert told["time"]
    assert "Current time" not in done.text and done.pending_note == ""
    assert done.engine_meta["notes"] == [
        {"at": position, "ids": done.engine_meta["notes"][0]["ids"], "text": told["text"]}
    ]
    resumed = AuditRecord.objects.get(session_id=sid, action="resume").payload
    assert resumed["paused_s"] >= 1
    # The note's tokens do not count against the token limit. The model may also end first,
    # its end token the 24th at the latest: the note holds the clock's time, so the text after
    # it differs from one run to the next.
    ended = AuditRecord.objects.get(session_id=sid, action="generated").payload["reason"]
    assert ended in ("max_tokens", "eos")
    if ended == "max_tokens":
        assert len(done.generated_ids) == 24
    else:
        assert len(done.generated_ids) <= 24


def test_a_short_pause_tells_nothing_and_resumes_identically(
    celery_worker_process, alice, plain_domain
):
    sid = paused_after_tokens(alice, seed=4)
    lifecycle.resume(alice, sid)
    done = finished(sid)
    whole = lifecycle.start_session(alice, "Plain", PROMPT, seed=4, max_new_tokens=24)["id"]
    assert finished(whole).generated_ids == done.generated_ids
    assert not AuditRecord.objects.filter(session_id=sid, action="time_told").exists()
    assert "notes" not in done.engine_meta
