"""Pause budgets and muted policies with the real model in a real worker: a chatty policy
pauses a few times, far apart, never before the first word; the rest are flags. A reviewer
mutes a policy at a pause, undoes it, and mutes it for good."""

from __future__ import annotations

import re

import pytest

from reviewer import lifecycle
from reviewer.models import AuditRecord, PausePolicy, ReviewSession
from tests.conftest import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.django_db(transaction=True)]

PROMPT = "Write a short clinical note about a patient with high blood pressure and chest pain."
ARTICLES = {"pattern": r"\b(the|a|an)\b", "flags": "i"}


def session(session_id: int) -> ReviewSession:
    return ReviewSession.objects.get(pk=session_id)


def wait_stopped(session_id: int) -> str:
    wait_for(
        lambda: session(session_id).status in {"paused", "generated"},
        timeout=120,
        what="a pause or the end",
    )
    return session(session_id).status


def test_a_chatty_policy_pauses_within_the_budget_and_flags_the_rest(
    celery_worker_process, alice, plain_domain
):
    # The case: top-1 below 0.35 with an 8-token cooldown paused ~20 times per 200.
    PausePolicy.objects.create(
        domain=plain_domain,
        name="Low confidence",
        kind="low_confidence",
        params={"threshold": 0.35},
        cooldown=8,
    )
    sid = lifecycle.start_session(alice, "Plain", PROMPT, seed=7, max_new_tokens=100)["id"]
    assert session(sid).pause_budget == {
        "per_100_tokens": 3,
        "min_distance": 20,
        "hold_until_first_word": True,
    }
    while wait_stopped(sid) == "paused":
        lifecycle.resume(alice, sid)
    done = session(sid)
    positions = [p.position for p in done.pauses.order_by("halted_at")]
    assert 1 <= len(positions) <= 3
    assert all(b - a >= 20 for a, b in zip(positions, positions[1:], strict=False))
    pause_texts = [e.payload["text"] for e in done.events.filter(type="pause").order_by("seq")]
    assert all(re.search(r"\w", text) for text in pause_texts)  # never before the first word
    refused = [
        e.payload for e in done.events.filter(type="flag") if "budget" in e.payload["evidence"]
    ]
    assert refused, "the policy never went over the budget; the test would prove nothing"
    assert all(f["policy"] == "Low confidence" and "not paused" in f["reason"] for f in refused)
    flagged = AuditRecord.objects.filter(session_id=sid, action="flagged").count()
    assert flagged >= len(refused)  # in the timeline too


def test_a_reviewer_mutes_a_policy_for_the_rest_of_the_session(
    celery_worker_process, alice, plain_domain
):
    plain_domain.max_pauses_per_100_tokens = plain_domain.min_pause_distance = 0
    plain_domain.save()
    PausePolicy.objects.create(
        domain=plain_domain, name="Any article", kind="regex", params=ARTICLES
    )
    sid = lifecycle.start_session(alice, "Plain", PROMPT, seed=1, max_new_tokens=60)["id"]
    with pytest.raises(lifecycle.Conflict):  # only at a pause
        lifecycle.mute(alice, sid, "Any article")
    assert wait_stopped(sid) == "paused"
    with pytest.raises(lifecycle.InvalidInput, match='Unknown policy "Nope"'):
        lifecycle.mute(alice, sid, "Nope")
    with pytest.raises(lifecycle.Conflict, match="not muted"):
        lifecycle.unmute(alice, sid, "Any article")

    # Muted, then undone: the policy pauses again.
    assert lifecycle.mute(alice, sid, "Any article")["muted_policies"] == ["Any article"]
    assert lifecycle.unmute(alice, sid, "Any article")["muted_policies"] == []
    lifecycle.resume(alice, sid)
    assert wait_stopped(sid) == "paused"
    assert session(sid).pauses.count() == 2

    lifecycle.mute(alice, sid, "Any article")
    muted_at = session(sid).last_seq
    lifecycle.resume(alice, sid)
    assert wait_stopped(sid) == "generated"
    done = session(sid)
    assert done.pauses.count() == 2 and done.muted_policies == ["Any article"]
    later = done.events.filter(seq__gt=muted_at)
    assert not later.filter(type__in=["flag", "pause"]).exists()
    paused_text = done.events.filter(type="pause").latest("seq").payload["text"]
    after = done.text[len(paused_text) :]
    assert re.search(r"\b(the|a|an)\b", after, re.I), "nothing to mute: proves nothing"
    kinds = [e.payload for e in done.events.filter(type="muted").order_by("seq")]
    assert [k["muted"] for k in kinds] == [True, False, True]
    actions = AuditRecord.objects.filter(session_id=sid, action__in=["mute", "unmute"])
    assert [a.action for a in actions.order_by("id")] == ["mute", "unmute", "mute"]
    assert all(a.payload == {"policy": "Any article"} for a in actions)
