"""A pause reaches the page in two beats (a real worker process, the real model): the pause
itself at the engine's halt, then its look-ahead, attention and snapshot as events of their
own. Nothing a reviewer does at the pause waits for them."""

from __future__ import annotations

import pytest

from reviewer import lifecycle
from reviewer.models import Edit, ReviewSession
from reviewer.worker import vault
from tests.conftest import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.django_db(transaction=True)]

PROMPT = "Write a short clinical note about a patient with high blood pressure and chest pain."
DETAILS = ["lookahead", "pause_attention", "snapshot"]


def session(session_id: int) -> ReviewSession:
    return ReviewSession.objects.get(pk=session_id)


def events_of(session_id: int, *kinds: str) -> list:
    return list(session(session_id).events.filter(type__in=kinds).order_by("seq"))


def paused_after_tokens(alice, n: int) -> int:
    sid = lifecycle.start_session(alice, "Plain", PROMPT, seed=5, max_new_tokens=60)["id"]
    wait_for(lambda: len(events_of(sid, "token")) >= n, what=f"{n} tokens")
    lifecycle.pause(alice, sid)
    wait_for(lambda: session(sid).status == "paused", what="the pause")
    return sid


def test_it_sends_the_pause_first_and_its_details_after(celery_worker_process, alice, plain_domain):
    sid = paused_after_tokens(alice, 3)
    pause = events_of(sid, "pause")[0]
    # Shown at once: why, where, the alternatives and the history; the rest is on its way.
    assert pause.payload["alternatives"] and pause.payload["history"]["probability"]
    assert pause.payload["lookahead"]["pending"] and pause.payload["attention"] == {}
    wait_for(lambda: len(events_of(sid, *DETAILS)) == 3, what="the pause's details")

    details = events_of(sid, *DETAILS)
    assert [e.type for e in details] == DETAILS and details[0].seq > pause.seq
    position, pause_id = pause.payload["position"], pause.payload["pause_id"]
    for detail in details:
        assert detail.payload["pause_id"] == pause_id and detail.payload["edit"] is None
        assert detail.payload["position"] == position
    lookahead, attention, snapshot = (d.payload for d in details)
    top = [alt["token_id"] for alt in pause.payload["alternatives"][:3]]
    assert [branch["token_id"] for branch in lookahead["branches"]] == top
    assert all(len(branch["ids"]) >= 1 for branch in lookahead["branches"])
    context = len(session(sid).prompt_ids) + position
    assert all(len(row) == context for row in attention["attention"]["layers"])
    assert snapshot["bytes"] == len(vault.configured().get(sid) or b"") > 0
    # The stored pause keeps the attention read after it.
    assert session(sid).pauses.get().attention["layers"] == attention["attention"]["layers"]


def test_it_applies_an_edit_sent_before_the_details_in_order_and_reads_them_again(
    celery_worker_process, alice, plain_domain
):
    sid = paused_after_tokens(alice, 4)
    before = len(events_of(sid, "snapshot"))  # checked as the edit is sent
    end = len(session(sid).text)
    lifecycle.edit(alice, sid, end, end, " (checked)")
    assert before == 0, "the edit was meant to reach the worker before the pause's snapshot"
    wait_for(lambda: Edit.objects.filter(session_id=sid, applied=True).exists(), what="the edit")
    edit = Edit.objects.get(session_id=sid)
    assert session(sid).text.endswith(" (checked)") and session(sid).status == "paused"
    # The edited state's details follow, naming the edit; the pause's own may have been skipped.
    wait_for(
        lambda: any(e.payload["edit"] == edit.pk for e in events_of(sid, "snapshot")),
        what="the edited state's snapshot",
    )
    after_edit = [e for e in events_of(sid, *DETAILS) if e.payload["edit"] == edit.pk]
    assert [e.type for e in after_edit] == DETAILS
    edited = events_of(sid, "edited")[0]
    assert all(e.seq > edited.seq for e in after_edit)
    assert after_edit[0].payload["position"] == len(session(sid).generated_ids)

    lifecycle.resume(alice, sid)
    wait_for(lambda: session(sid).status == "generated", timeout=120, what="the end")
    assert " (checked)" in session(sid).text
