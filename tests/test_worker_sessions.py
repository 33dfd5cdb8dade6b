"""One worker process serves many sessions at once: they generate together, one session's
pause, edit or resume does not wait for the others' generation, and a killed worker's
sessions all finish elsewhere with exactly the tokens an uninterrupted run yields."""

from __future__ import annotations

import importlib.util
import signal

import pytest

from inference.decode import RunRequest
from inference.state import Checkpoint
from reviewer import lifecycle
from reviewer.models import Edit, PauseEvent, ReviewSession
from reviewer.worker import dispatch
from tests.conftest import load_real_engine, start_worker, stop_process, wait_for
from tests.test_workflow import session, status_is, tokens_streamed

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.django_db(transaction=True)]

PROMPTS = [
    "Write a short clinical note about a patient with a sprained ankle.",
    "Write a short clinical note about a patient with a sore throat.",
    "Write a short clinical note about a patient with a migraine.",
    "Write a short clinical note about a patient with back pain.",
]


def start_all(user, max_new_tokens: int) -> list[int]:
    return [
        lifecycle.start_session(user, "Plain", prompt, seed=i, max_new_tokens=max_new_tokens)["id"]
        for i, prompt in enumerate(PROMPTS)
    ]


def token_count(session_id: int) -> int:
    return session(session_id).events.filter(type="token").count()


@pytest.fixture(params=["transformers", "vllm"])
def serving_worker(request, monkeypatch):
    """A worker on each backend: the session-wide one (transformers), or one on vLLM that
    every segment is sent to."""
    if request.param == "transformers":
        request.getfixturevalue("celery_worker_process")
        yield
        return
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not installed (make vllm)")
    worker, name = start_worker("vllm-many", env={"CAESURA_BACKEND": "vllm"})
    send = dispatch.segment
    monkeypatch.setattr(dispatch, "segment", lambda args, holder: send(args, name))
    yield
    stop_process(worker)


def test_it_generates_for_four_sessions_at_once_and_pauses_one_alone(
    serving_worker, alice, plain_domain
):
    ids = start_all(alice, max_new_tokens=64)
    # Together: every session streams before any has finished (one after another, the
    # first would have ended before the last began).
    wait_for(lambda: all(token_count(i) >= 2 for i in ids), timeout=120, what="four streams")
    assert all(session(i).status == "running" for i in ids)

    paused = ids[1]
    lifecycle.pause(alice, paused)
    wait_for(status_is(paused, "paused"), what="the manual pause")
    pause = PauseEvent.objects.get(session_id=paused)
    assert pause.latency_ms is not None and pause.latency_ms >= 0
    held = token_count(paused)
    assert pause.position == held == len(session(paused).generated_ids)

    # An edit at the pause is applied while the other sessions are still generating.
    others = [i for i in ids if i != paused]
    end = len(session(paused).text)
    lifecycle.edit(alice, paused, end, end, " (seen)")
    wait_for(lambda: Edit.objects.filter(session_id=paused, applied=True).exists(), what="edit")
    assert any(session(i).status == "running" for i in others)
    before = {i: token_count(i) for i in others if session(i).status == "running"}
    wait_for(
        lambda: any(token_count(i) > n for i, n in before.items()),
        what="the other sessions to go on generating",
    )
    assert token_count(paused) == held  # a paused session costs no decode time

    edited = len(session(paused).generated_ids)
    lifecycle.resume(alice, paused)
    for i in ids:
        wait_for(status_is(i, "generated", "failed"), timeout=180, what=f"session {i} to end")
    for i in ids:
        final = session(i)
        assert final.status == "generated", final.error
        streamed = list(range(len(final.generated_ids)))  # no token lost or repeated
        if i == paused:  # the edit's tokens came as one "edited" event
            streamed = streamed[:held] + streamed[edited:]
        assert positions(final) == streamed
    assert session(paused).text.count(" (seen)") == 1


def positions(final: ReviewSession) -> list[int]:
    tokens = final.events.filter(type="token").order_by("seq")
    return list(tokens.values_list("payload__position", flat=True))


def test_it_finishes_every_session_of_a_killed_worker_elsewhere(
    alice, plain_domain, monkeypatch, celery_worker_process
):
    """The run's shared worker is the one that takes over."""
    victim, victim_name = start_worker("victim-many")
    send = dispatch.segment
    monkeypatch.setattr(dispatch, "segment", lambda args, holder: send(args, victim_name))
    try:
        ids = start_all(alice, max_new_tokens=40)[:3]
        wait_for(lambda: all(tokens_streamed(i, 3)() for i in ids), timeout=120, what="streams")
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        monkeypatch.setattr(dispatch, "segment", send)
        for i in ids:
            wait_for(status_is(i, "generated", "failed"), timeout=180, what=f"session {i}")
    finally:
        stop_process(victim)
    engine = load_real_engine()
    for i in ids:
        final = session(i)
        assert final.status == "generated", final.error
        assert uninterrupted(engine, final) == final.generated_ids


def uninterrupted(engine, final: ReviewSession) -> list[int]:
    state = engine.rebuild(Checkpoint(final.prompt_ids, [], final.decoding, final.policy_specs))
    engine.run(state, RunRequest(max_new_tokens=final.max_new_tokens))
    return list(state.generated_ids)
