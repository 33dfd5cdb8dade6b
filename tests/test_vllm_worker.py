"""A real Celery worker on the vLLM backend (CAESURA_BACKEND=vllm): the same session, pause,
edit and resume as on transformers, with what vLLM cannot do said plainly."""

from __future__ import annotations

import importlib.util

import pytest

from reviewer import lifecycle
from reviewer.models import ReviewSession
from reviewer.worker import dispatch
from tests.conftest import start_worker, stop_process, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.model,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None, reason="vLLM is not installed (make vllm)"
    ),
]

PROMPT = "Write a short clinical note about a patient with high blood pressure and chest pain."


def session(session_id: int) -> ReviewSession:
    return ReviewSession.objects.get(pk=session_id)


def test_it_pauses_edits_and_resumes_a_session_on_the_vllm_backend(
    alice, plain_domain, monkeypatch
):
    worker, name = start_worker("vllm", env={"CAESURA_BACKEND": "vllm"})
    send = dispatch.segment
    monkeypatch.setattr(dispatch, "segment", lambda args, holder: send(args, name))
    try:
        sid = lifecycle.start_session(alice, "Plain", PROMPT, seed=4, max_new_tokens=40)["id"]
        wait_for(lambda: session(sid).events.filter(type="token").count() >= 3, timeout=120)
        lifecycle.pause(alice, sid)
        wait_for(lambda: session(sid).status == "paused", timeout=60, what="the pause")
        snapshot = session(sid).events.filter(type="snapshot")  # the last of the details
        wait_for(snapshot.exists, timeout=60, what="the pause's details")
        paused = session(sid)
        pause = paused.pauses.get()
        assert pause.position == len(paused.generated_ids)  # exact: nothing past it
        assert pause.alternatives and pause.attention["layers"]  # attention computed on demand
        tokens = list(paused.events.filter(type="token").order_by("seq"))
        assert all(t.payload["attention"] == [] for t in tokens)  # no live attention on vLLM
        end = len(paused.text)
        lifecycle.edit(alice, sid, end, end, " (reviewed)")
        wait_for(lambda: session(sid).events.filter(type="edited").exists(), what="the edit")
        lifecycle.resume(alice, sid)
        wait_for(lambda: session(sid).status == "generated", timeout=120, what="the end")
    finally:
        stop_process(worker)
    done = session(sid)
    assert " (reviewed)" in done.text
    assert len(done.generated_ids) <= 40
    assert not done.error
