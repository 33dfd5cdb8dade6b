"""A worker process killed mid-generation loses nothing: another worker takes the session
over from Postgres and finishes it with exactly the tokens an uninterrupted run yields."""

from __future__ import annotations

import signal

import pytest

from inference.decode import RunRequest
from inference.state import Checkpoint
from reviewer import lifecycle
from reviewer.models import Edit, ReviewSession
from reviewer.worker import dispatch
from tests.conftest import load_real_engine, start_worker, stop_process, wait_for
from tests.test_workflow import PROMPT, session, status_is, tokens_streamed

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.django_db(transaction=True)]


def test_it_finishes_a_session_after_its_worker_is_killed(
    alice, plain_domain, monkeypatch, celery_worker_process
):
    """The run's shared worker is the one that takes over."""
    victim, victim_name = start_worker("victim")
    send = dispatch.segment
    monkeypatch.setattr(dispatch, "segment", lambda args, holder: send(args, victim_name))
    try:
        sid = lifecycle.start_session(alice, "Plain", PROMPT, seed=11, max_new_tokens=48)["id"]
        wait_for(tokens_streamed(sid, 3), what="three tokens")
        lifecycle.pause(alice, sid)
        wait_for(status_is(sid, "paused"), what="the pause")
        end = len(session(sid).text)
        lifecycle.edit(alice, sid, end, end, " (reviewed)")
        wait_for(
            lambda: Edit.objects.filter(session_id=sid, applied=True).exists(), what="the edit"
        )
        edited_ids = list(session(sid).generated_ids)
        lifecycle.resume(alice, sid)
        wait_for(tokens_streamed(sid, len(edited_ids) + 8), what="tokens after the resume")

        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        streamed = {
            e.payload["position"]: e.payload["token_id"]
            for e in session(sid).events.filter(type="token")
        }
        monkeypatch.setattr(dispatch, "segment", send)
        wait_for(
            status_is(sid, "generated", "failed"),
            timeout=120,
            what="the session to finish elsewhere",
        )
    finally:
        stop_process(victim)

    final = session(sid)
    assert final.status == "generated", final.error
    assert " (reviewed)" in final.text
    assert all(final.generated_ids[p] == t for p, t in streamed.items() if p >= len(edited_ids))
    assert reference_run(final, edited_ids) == final.generated_ids


def reference_run(final: ReviewSession, edited_ids: list[int]) -> list[int]:
    """The same generation without the kill: from the edited ids, uninterrupted."""
    engine = load_real_engine()
    state = engine.rebuild(
        Checkpoint(final.prompt_ids, edited_ids, final.decoding, final.policy_specs)
    )
    engine.run(state, RunRequest(max_new_tokens=final.max_new_tokens))
    return list(state.generated_ids)
