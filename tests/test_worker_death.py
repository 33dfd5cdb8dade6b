"""A worker process killed mid-generation loses nothing: another worker takes the session
over from Postgres and finishes it with exactly the tokens an uninterrupted run yields."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import uuid

import pytest
from django.conf import settings

from inference.loader import load_engine
from reviewer import services, tasks
from reviewer.models import Edit, ReviewSession
from tests.conftest import REPO, wait_for_worker, worker_env
from tests.test_workflow import PROMPT, session, status_is, tokens_streamed, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.django_db(transaction=True)]


def start_worker(tag: str) -> tuple[subprocess.Popen, str]:
    name = f"{tag}-{uuid.uuid4().hex[:6]}@{socket.gethostname()}"
    log = open(REPO / "var" / f"test-worker-{tag}.log", "w")  # noqa: SIM115 - owned by the process
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "webapp",
            "worker",
            "--pool=solo",
            "--loglevel=INFO",
            f"--hostname={name}",
        ],
        cwd=REPO,
        env=worker_env(settings.DATABASES["default"]["NAME"]),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    wait_for_worker(process, name)
    return process, name


def test_it_finishes_a_session_after_its_worker_is_killed(alice, plain_domain, monkeypatch):
    victim, victim_name = start_worker("victim")
    dispatch = tasks.dispatch_segment
    monkeypatch.setattr(tasks, "dispatch_segment", lambda args, holder: dispatch(args, victim_name))
    successor = None
    try:
        sid = services.start_session(alice, "Plain", PROMPT, seed=11, max_new_tokens=48)["id"]
        wait_for(tokens_streamed(sid, 3), what="three tokens")
        services.pause(alice, sid)
        wait_for(status_is(sid, "paused"), what="the pause")
        end = len(session(sid).text)
        services.edit(alice, sid, end, end, " (reviewed)")
        wait_for(
            lambda: Edit.objects.filter(session_id=sid, applied=True).exists(), what="the edit"
        )
        edited_ids = list(session(sid).generated_ids)
        services.resume(alice, sid)
        wait_for(tokens_streamed(sid, len(edited_ids) + 8), what="tokens after the resume")

        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        streamed = {
            e.payload["position"]: e.payload["token_id"]
            for e in session(sid).events.filter(type="token")
        }
        monkeypatch.setattr(tasks, "dispatch_segment", dispatch)
        successor, _ = start_worker("successor")
        wait_for(
            status_is(sid, "generated", "failed"),
            timeout=120,
            what="the session to finish elsewhere",
        )
    finally:
        for process in (victim, successor):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=20)

    final = session(sid)
    assert final.status == "generated", final.error
    assert " (reviewed)" in final.text
    assert all(final.generated_ids[p] == t for p, t in streamed.items() if p >= len(edited_ids))
    assert reference_run(final, edited_ids) == final.generated_ids


def reference_run(final: ReviewSession, edited_ids: list[int]) -> list[int]:
    """The same generation without the kill: from the edited ids, uninterrupted."""
    engine = load_engine(settings.MODEL_DIR)
    state = engine.rebuild(final.prompt_ids, edited_ids, final.decoding, final.policy_specs)
    engine.run(state, max_new_tokens=final.max_new_tokens)
    return list(state.generated_ids)
