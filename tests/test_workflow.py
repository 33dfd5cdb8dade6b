"""Review sessions end to end: the real default model in a real Celery worker process,
Postgres, Redis. Each test drives the services the way the API and websocket do."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from prometheus_client.parser import text_string_to_metric_families

from inference.serving import TURN_PARTS
from reviewer import lifecycle
from reviewer.analytics import metrics
from reviewer.models import (
    AuditRecord,
    Edit,
    GlossaryTerm,
    PausePolicy,
    ReviewSession,
)
from tests.conftest import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.django_db(transaction=True)]

PROMPT = "Write a short clinical note about a patient with high blood pressure and chest pain."


def session(session_id: int) -> ReviewSession:
    return ReviewSession.objects.get(pk=session_id)


def status_is(session_id: int, *statuses: str):
    return lambda: session(session_id).status in statuses


def details_read(session_id: int):
    kinds = {"lookahead", "pause_attention", "snapshot"}
    return lambda: kinds <= set(session(session_id).events.values_list("type", flat=True))


def tokens_streamed(session_id: int, n: int):
    return lambda: session(session_id).events.filter(type="token").count() >= n


def test_it_pauses_edits_with_a_glossary_term_resumes_and_finishes(
    celery_worker_process, alice, plain_domain
):
    started = lifecycle.start_session(alice, "Plain", PROMPT, seed=3, max_new_tokens=40)
    sid = started["id"]
    wait_for(tokens_streamed(sid, 4), what="four tokens")
    lifecycle.pause(alice, sid)
    wait_for(status_is(sid, "paused"), what="the manual pause")
    # The pause is sent at the halt; its look-ahead, attention and snapshot follow.
    wait_for(details_read(sid), what="the pause's details")

    paused = session(sid)
    pause = paused.pauses.get()
    assert pause.trigger == "manual" and pause.latency_ms is not None and pause.latency_ms >= 0
    # The request's path on the worker, stage by stage, in the order it took them.
    stages = paused.events.get(type="pause").payload["stages"]
    path = [stages[k] for k in ("read", "honoured", "reported", "stored")]
    assert path == sorted(path) and path[0] >= 0 and stages["step_ms"] > 0
    # The request came during the turn before the halting one (or earlier): that turn's length
    assert stages["previous_turn_ms"] > 0 and stages["turn"] <= stages["honoured"]
    # ... and what that turn held, each part timed (rounded to 0.1 ms each)
    held = [stages.get(f"previous_{part}_ms", 0) for part in TURN_PARTS]
    assert stages["previous_step_ms"] > 0 and sum(held) <= stages["previous_turn_ms"] + 0.5
    assert stages["honoured"] <= pause.latency_ms + 1  # the halt follows the boundary at once
    # Another layer's heads, read from the frozen state by the worker.
    lifecycle.attention(alice, sid, 3)
    wait_for(lambda: paused.events.filter(type="attention").exists(), what="layer 3's heads")
    heads = paused.events.get(type="attention").payload
    assert heads["layer"] == 3 and heads["position"] == len(paused.generated_ids)
    assert len(heads["heads"]) == 9  # SmolLM2: nine query heads
    context = len(paused.prompt_ids) + len(paused.generated_ids)
    assert all(len(row) == context and abs(sum(row) - 1) < 0.01 for row in heads["heads"])
    assert heads["heads"] != pause.attention["heads"]  # not the last layer's again
    assert pause.position == len(paused.generated_ids)
    assert pause.alternatives and pause.attention["layers"]
    tokens = list(paused.events.filter(type="token").order_by("seq"))
    assert [t.payload["position"] for t in tokens] == list(range(len(paused.generated_ids)))
    seqs = list(paused.events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))

    term = GlossaryTerm.objects.get(term="high blood pressure")
    end = len(paused.text)
    start = max(0, end - 5)
    lifecycle.edit(alice, sid, start, end, " " + term.preferred, glossary_term=term.pk)
    wait_for(lambda: Edit.objects.filter(session_id=sid, applied=True).exists(), what="the edit")
    assert Edit.objects.get(session_id=sid).glossary_code == term.code  # kept for the redline
    edited = session(sid)
    assert edited.text.endswith(" " + term.preferred)
    assert edited.status == "paused"
    # The page gets the new tokens one by one, with the signals of where they stand.
    applied = edited.events.filter(type="edited").latest("seq").payload
    pieces = applied["tokens"]
    assert len(pieces) == len(edited.generated_ids) - applied["token_start"] > 0
    assert edited.text.endswith("".join(p["text"] for p in pieces))
    assert all(0 <= p["top1"] <= 1 and p["entropy"] >= 0 for p in pieces)

    lifecycle.resume(alice, sid)
    wait_for(status_is(sid, "generated"), what="the end of generation")
    done = session(sid)
    assert term.preferred in done.text
    assert len(done.text) > len(edited.text)
    lifecycle.approve(alice, sid, comment="fine")
    assert session(sid).status == "completed"
    actions = list(AuditRecord.objects.filter(session_id=sid).values_list("action", flat=True))
    for expected in [
        "start",
        "pause_requested",
        "paused",
        "replace_requested",
        "edit_replace",
        "resume",
        "approve",
    ]:
        assert expected in actions


def states_in_worker_memory() -> float:
    """The workers' own figure, as /metrics shows it."""
    text = metrics.exposition().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    family = families.get("caesura_worker_states")
    return sum(s.value for s in family.samples) if family else 0.0


def test_it_stops_at_the_token_that_triggers_a_policy(celery_worker_process, alice, plain_domain):
    held = states_in_worker_memory()
    PausePolicy.objects.create(
        domain=plain_domain,
        name="Any article",
        kind="regex",
        params={"pattern": r"\b(the|a|an)\b", "flags": "i"},
    )
    sid = lifecycle.start_session(alice, "Plain", PROMPT, seed=1, max_new_tokens=60)["id"]
    wait_for(status_is(sid, "paused", "generated"), what="a policy pause")
    paused = session(sid)
    assert paused.status == "paused"
    pause = paused.pauses.get()
    assert pause.trigger == "Any article" and pause.kind == "regex"
    start, end = pause.evidence.get("span") or paused.events.get(type="pause").payload["span"]
    assert paused.text[start:end].lower() in {"the", "a", "an"}
    # Nothing was generated after the token that completed the match.
    assert pause.position == len(paused.generated_ids)
    assert len(paused.text) - end <= 2
    wait_for(lambda: states_in_worker_memory() == held + 1, what="the state kept in memory")
    lifecycle.cancel(alice, sid)
    assert session(sid).status == "cancelled"
    # Cancelled at a pause: the worker that held the frozen state lets it go.
    wait_for(lambda: states_in_worker_memory() == held, what="the worker to free the state")


def test_it_rolls_back_to_a_position_and_continues_from_there(
    celery_worker_process, alice, plain_domain
):
    sid = lifecycle.start_session(alice, "Plain", PROMPT, seed=5, max_new_tokens=24)["id"]
    wait_for(tokens_streamed(sid, 6), what="six tokens")
    lifecycle.pause(alice, sid)
    wait_for(status_is(sid, "paused"), what="the pause")
    kept = session(sid).generated_ids[:3]
    lifecycle.rollback(alice, sid, 3)
    wait_for(lambda: session(sid).events.filter(type="truncated").exists(), what="the rollback")
    assert session(sid).generated_ids == kept
    assert session(sid).events.filter(type="truncated").exists()
    lifecycle.resume(alice, sid)
    wait_for(status_is(sid, "generated"), what="the end")
    final = session(sid)
    assert final.generated_ids[:3] == kept and len(final.generated_ids) == 24


def test_it_refuses_invalid_transitions_without_changing_anything(
    celery_worker_process, alice, bob, plain_domain
):
    sid = lifecycle.start_session(alice, "Plain", PROMPT, seed=2, max_new_tokens=8)["id"]
    with pytest.raises(lifecycle.NotFound):
        lifecycle.pause(bob, sid)
    wait_for(status_is(sid, "generated"), what="the end")
    before = AuditRecord.objects.count()
    with pytest.raises(lifecycle.Conflict):
        lifecycle.resume(alice, sid)
    with pytest.raises(lifecycle.Conflict):
        lifecycle.choose(alice, sid, 1)  # alternatives are offered at a pause only
    assert AuditRecord.objects.count() == before
    assert session(sid).status == "generated"


def test_it_reopens_a_generated_text_for_a_correction_then_approves_the_corrected_text(
    celery_worker_process, alice, plain_domain
):
    sid = lifecycle.start_session(alice, "Plain", PROMPT, seed=2, max_new_tokens=12)["id"]
    wait_for(status_is(sid, "generated"), what="the end")
    generated = session(sid)
    word_end = generated.text.index(" ", 1) if " " in generated.text[1:] else len(generated.text)
    lifecycle.edit(alice, sid, 0, word_end, "Corrected")
    assert session(sid).status == "paused"  # at once: a pause at the end of the text
    wait_for(lambda: session(sid).events.filter(type="edited").exists(), what="the edit applied")
    corrected = session(sid)
    assert corrected.text == "Corrected" + generated.text[word_end:]
    assert corrected.pauses.get(resumed_at__isnull=True).position == len(generated.generated_ids)
    assert corrected.events.filter(type="pause").exists()
    lifecycle.approve(alice, sid, "Corrected the first word.")
    final = session(sid)
    assert (final.status, final.text) == ("completed", corrected.text)
    kinds = list(AuditRecord.objects.filter(session_id=sid).values_list("action", flat=True))
    assert kinds.index("reopen") < kinds.index("edit_replace") < kinds.index("approve")


def test_it_detects_a_tampered_audit_row(celery_worker_process, alice, plain_domain):
    sid = lifecycle.start_session(alice, "Plain", PROMPT, seed=2, max_new_tokens=4)["id"]
    wait_for(status_is(sid, "generated"), what="the end")
    call_command("verify_audit")
    record = AuditRecord.objects.filter(session_id=sid).order_by("id")[1]
    AuditRecord.objects.filter(pk=record.pk).update(payload={"tampered": True})
    with pytest.raises(Exception, match=f"record {record.pk}"):
        call_command("verify_audit")
