"""The gateway over a live generation, with the openai SDK against a live server (daphne) and
a real worker: delayed delivery stays a sentence behind the model and ends with the approved
text byte for byte; a pause keeps what was released and hands the rest to the reviewer; a
client that disconnects mid-stream loses nothing.

Persona: "desk" is an application bound to the Plain domain, set up here as a low-risk
underwriting-like domain: delayed delivery one sentence behind, approved automatically when
no policy paused."""

from __future__ import annotations

import contextlib
import json
import time

import httpx
import openai
import pytest

from tests.conftest import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.django_db(transaction=True)]

ASK = [{"role": "user", "content": "Write four short sentences about saving money."}]


@pytest.fixture
def desk(plain_domain):
    from reviewer.lifecycle import application_keys
    from reviewer.models.domain import DELAYED

    plain_domain.delivery_mode, plain_domain.delay_sentences = DELAYED, 1
    plain_domain.auto_approve_unpaused = True
    plain_domain.save()
    return application_keys.create("desk", [plain_domain], "root", max_concurrent=4)[1]


@pytest.fixture
def client(server_url, celery_worker_process, desk):
    return openai.OpenAI(base_url=server_url + "/v1", api_key=desk, max_retries=0)


def session_of(completion_id: str):
    from reviewer.models import ReviewSession

    return ReviewSession.objects.get(pk=int(completion_id.rsplit("-", 1)[-1]))


def text_so_far(session_id: int) -> tuple[str, str, int]:
    """The session's status, its text as the stored events have it now, and how much of it is
    locked for the application (the worker locks what each token releases as it stores it)."""
    from reviewer.gateway.progress import read_events, read_row
    from reviewer.lifecycle.record import Token, apply, text_of

    row = read_row(session_id)
    tokens: list[Token] = []
    for event in read_events(session_id, 0):
        apply(tokens, str(event["type"]), event)
    return row.status, text_of(tokens), row.released_chars


def test_it_streams_a_sentence_behind_the_model_then_the_approved_text(client):
    stream = client.chat.completions.create(
        model="caesura:plain", messages=ASK, max_tokens=48, temperature=0, stream=True
    )
    received, lags, session_id = "", [], None
    for chunk in stream:
        session_id = session_id or int(chunk.id.rsplit("-", 1)[-1])
        piece = chunk.choices[0].delta.content if chunk.choices else None
        if not piece:
            continue
        received += piece
        status, generated, locked = text_so_far(session_id)
        # While it runs, nothing has left that was not locked first.
        assert status != "running" or len(received) <= locked, (received, locked)
        if status == "running" and locked < len(generated):  # a sentence still held back
            assert generated.startswith(received), (received, generated)
            assert generated[len(received) :].strip(), (received, generated)
            lags.append(len(generated) - len(received))
    assert session_id is not None
    session = session_of(f"chatcmpl-{session_id}")
    assert session.status == "completed" and lags, "nothing arrived while it generated"
    assert received == session.text  # byte for byte
    assert session.released_chars <= len(session.text)
    # The held last sentence left with the last tokens, locked by the worker as they were
    # stored (unless those were written before the run's end was known: then at the approval).
    last = session.events.filter(type="token").latest("seq").payload
    if "released" in last:
        assert last["released"] == session.released_chars == len(session.text)


def test_it_loses_nothing_when_the_client_disconnects_mid_stream(client, server_url, desk):
    body = {"model": "caesura:plain", "messages": ASK, "max_tokens": 32, "stream": True}
    headers = {"Authorization": f"Bearer {desk}"}
    with httpx.stream(
        "POST", server_url + "/v1/chat/completions", json=body, headers=headers, timeout=60
    ) as answer:
        first = next(line for line in answer.iter_lines() if line.startswith("data: "))
    completion_id = json.loads(first[len("data: ") :])["id"]  # the connection is closed now
    session = session_of(completion_id)
    assert session.status == "running"
    wait_for(lambda: session_of(completion_id).status == "completed", what="the generation")
    done = session_of(completion_id)
    picked_up = client.responses.retrieve(f"resp_{done.pk}")
    assert picked_up.output_text == done.text
    reason = done.events.get(type="finish").payload["reason"]  # it ran to its end, not cancelled
    # Approved; cut by the token limit, a response says so as OpenAI does.
    assert picked_up.status == ("incomplete" if reason == "max_tokens" else "completed")
    assert not done.audit.filter(action="cancel").exists()


def database_sessions() -> int:
    """Connections ever opened to the test database (Postgres's own count)."""
    from django.db import connection

    time.sleep(1.2)  # a backend reports its connection with its next statistics, within a second
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


def test_it_opens_no_database_connection_per_call_once_warm(client):
    def call() -> None:
        answer = client.chat.completions.create(model="caesura:plain", messages=ASK, max_tokens=4)
        assert answer.choices[0].message.content

    call()  # the web server's pool, the worker's task connection and a relay's thread
    before = database_sessions()
    for _ in range(6):
        call()
    # Each call used to open three: a request's thread in daphne, a Celery task, a relay's thread.
    assert database_sessions() - before < 6


def test_it_holds_no_database_connection_while_calls_wait_for_review(
    server_url, celery_worker_process, plain_domain
):
    from reviewer.lifecycle import application_keys
    from reviewer.models.domain import AFTER_REVIEW

    plain_domain.delivery_mode, plain_domain.auto_approve_unpaused = AFTER_REVIEW, False
    plain_domain.save()
    key = application_keys.create("waits", [plain_domain], "root", max_concurrent=4)[1]
    client = openai.OpenAI(base_url=server_url + "/v1", api_key=key, max_retries=0)
    response = client.responses.create(
        model="caesura:plain", input="Say hello.", max_output_tokens=2, background=True
    )
    from reviewer.models import ReviewSession

    session_id = int(response.id.removeprefix("resp_"))
    generated = ReviewSession.objects.filter(pk=session_id, status="generated")
    wait_for(generated.exists, what="the generation")
    headers = {"Authorization": f"Bearer {key}"}
    url = f"{server_url}/v1/responses/{response.id}?stream=true"
    # More calls waiting for the reviewer than the test server's pool has connections (4).
    with contextlib.ExitStack() as waiting:
        for _ in range(6):
            stream = waiting.enter_context(httpx.stream("GET", url, headers=headers, timeout=30))
            assert stream.status_code == 200
            next(stream.iter_raw())  # it follows the session now, waiting for the review
        started = time.monotonic()
        listed = httpx.get(server_url + "/v1/models", headers=headers, timeout=30)
        assert listed.status_code == 200 and time.monotonic() - started < 5


def test_a_pause_keeps_the_released_text_and_hands_the_rest_to_the_reviewer(
    client, plain_domain, alice
):
    """A policy pauses a delayed generation after two sentences: the first left with the token
    that released it, locked by the worker as it stored that token; a reviewer cannot change
    it, may change the second, and the application then receives exactly the approved text."""
    import threading

    from reviewer import lifecycle
    from reviewer.models import PausePolicy

    PausePolicy.objects.create(
        domain=plain_domain, name="Two", kind="sentence_count", params={"every": 2}
    )
    plain_domain.reviewers.add(alice)
    received: list[str] = []
    session_ids: list[int] = []

    def call() -> None:
        stream = client.chat.completions.create(
            model="caesura:plain", messages=ASK, max_tokens=96, temperature=0, stream=True
        )
        for chunk in stream:
            session_ids[:] = session_ids or [int(chunk.id.rsplit("-", 1)[-1])]
            piece = chunk.choices[0].delta.content if chunk.choices else None
            received.append(piece or "")

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    wait_for(lambda: bool(session_ids), what="the stream's first chunk")
    sid = session_ids[0]
    wait_for(lambda: session_of(f"chatcmpl-{sid}").status != "running", what="the pause")
    paused = session_of(f"chatcmpl-{sid}")
    assert paused.status == "paused", paused.status
    released = paused.released_chars
    wait_for(lambda: len("".join(received)) >= released, what="the released text")
    assert "".join(received) == paused.text[:released]  # all that was released, no more
    assert 0 < released < len(paused.text)
    releasing = [e.payload["released"] for e in paused.events.filter(type="token")
                 if "released" in e.payload]  # fmt: skip
    assert releasing and max(releasing) == released  # the worker's lock, with its token

    lifecycle.claim(alice, sid)
    with pytest.raises(lifecycle.Conflict, match="locked"):
        lifecycle.edit(alice, sid, 0, 1, "X")
    end = len(paused.text)
    lifecycle.edit(alice, sid, released, end, " Keep an emergency fund.")
    wait_for(lambda: session_of(f"chatcmpl-{sid}").text.endswith("fund."), what="the edit")
    lifecycle.approve(alice, sid, comment="Checked.")
    caller.join(timeout=60)
    approved = session_of(f"chatcmpl-{sid}")
    assert approved.status == "completed"
    assert "".join(received) == approved.text  # byte for byte, the edit included
    assert approved.text.startswith(paused.text[:released])
