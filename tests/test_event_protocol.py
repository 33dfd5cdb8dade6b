"""One declared type per event kind: what the worker and services emit matches it, the
websocket reference lists every kind, and an engine rollback and a reviewer truncate are told
apart by kind."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
from django.apps import apps

from inference.decode import StopInfo
from inference.edits import EditResult
from inference.policies import Decision
from inference.signals import Alternative, Signals
from inference.sink import FlagEvent, RollbackEvent, TokenEvent
from reviewer import events, lifecycle
from reviewer.lifecycle import record
from reviewer.models import Edit, ReviewSession, SessionEvent
from tests.conftest import wait_for
from tests.session_factory import make_session

WEBSOCKET_DOC = Path(__file__).resolve().parent.parent / "docs" / "websocket.md"

SIGNALS = Signals(
    top1_prob=0.6,
    entropy=1.23456,
    margin=0.3,
    alternatives=(Alternative(42, " cough", 0.6), Alternative(7, " rash", 0.3)),
    chosen_prob=0.61234,
)
DRIFT = Decision("drift", "drift", "rollback", "Entropy rose", {"entropy": 3.1}, rollback_to=2)
TERMS = Decision("terms", "keyword", "flag", "Matched", {"keyword": "fever"}, span=(16, 21))
TERMS_SPEC = {"name": "terms", "kind": "keyword", "params": {"keywords": ["fever"]}}
MANUAL = Decision("manual", "manual", "pause", "Reviewer asked", {})
ATTENTION = {"tokens": ["a", "b"], "prompt_length": 1, "layers": [[0.123456, 0.876544]],
             "layer": 0, "heads": [[0.5, 0.5]]}  # fmt: skip


def mismatches_of(session: ReviewSession) -> list[str]:
    stored = SessionEvent.objects.filter(session=session).order_by("seq")
    return [problem for e in stored for problem in events.mismatches(e.type, e.payload)]


def store(session: ReviewSession, type: str, payload: dict) -> None:
    """A row as an earlier version stored it, whatever its kind."""
    seq = events.next_seq(session.pk)
    SessionEvent.objects.create(session=session, seq=seq, type=type, payload=payload)


def kinds_of(session: ReviewSession) -> list[str]:
    stored = SessionEvent.objects.filter(session=session).order_by("seq")
    return list(stored.values_list("type", flat=True))


def test_it_lists_every_event_kind_in_the_websocket_reference_and_the_module_docstring():
    websocket = WEBSOCKET_DOC.read_text().split("\n## Events\n", 1)[1].split("\n## ", 1)[0]
    in_reference = set(re.findall(r"^\| `(\w+)` \|", websocket, flags=re.MULTILINE))
    assert in_reference == set(events.KINDS)
    in_docstring = set(re.findall(r"``(\w+)``", events.__doc__))
    assert set(events.KINDS) <= in_docstring


def test_it_gives_an_engine_rollback_and_a_reviewer_truncate_kinds_of_their_own():
    assert events.edit_kind("truncate") == events.TRUNCATED != events.ROLLBACK
    assert events.KINDS[events.ROLLBACK] is not events.KINDS[events.TRUNCATED]
    assert "removed_from" not in events.KINDS[events.TRUNCATED].__annotations__
    assert events.mismatches("rolled_back", {}) == ["unknown kind 'rolled_back'"]


def test_it_finds_a_payload_that_differs_from_its_kind():
    assert events.mismatches("status", {"status": "paused"}) == []
    assert events.mismatches("error", {"message": "no", "edit": 3}) == []
    assert events.mismatches("error", {"message": "no"}) == []
    assert events.mismatches("status", {"state": "paused"}) == [
        "status: missing 'status'",
        "status: undeclared 'state'",
    ]


@pytest.mark.django_db
def test_every_event_the_worker_reports_matches_its_declared_type(alice):
    """The payloads the worker builds from the engine's own events, through the services that
    store them; the real decode loop's are checked end to end below."""
    session = make_session(alice, status=ReviewSession.RUNNING, policy_specs=[TERMS_SPEC])
    token = TokenEvent(5, 16, " cough", 24, SIGNALS, 0, [0.25] * 7, similarity=0.4375)
    lifecycle.record_token(session, events.token(token))
    lifecycle.record_flag(session, events.flag(FlagEvent(5, TERMS)))
    rollback = RollbackEvent(DRIFT, 2, 6, (13, 14, 15, 16), " has a fever", 1, 1, False)
    lifecycle.record_rollback(session, events.rollback(rollback))
    stop = StopInfo("pause", decision=MANUAL, decisions=(MANUAL,), position=2)
    report = events.pause_report(stop, SIGNALS, ATTENTION, "The patient", [0.9, 0.8], [0.1, 0.2])
    paused = lifecycle.record_pause(session, report, requested_at=None)
    of = events.detail_of(paused.pk, None, 2)
    lookahead = events.lookahead(
        of, [{"token_id": 16, "ids": [16], "text": " x", "ends": False}], 9.5
    )
    lifecycle.record_pause_detail(session.pk, events.LOOKAHEAD, lookahead)
    attention = events.pause_attention(of, ATTENTION)
    lifecycle.record_pause_detail(session.pk, events.PAUSE_ATTENTION, attention)
    lifecycle.record_pause_detail(session.pk, events.SNAPSHOT, events.snapshot(of, 4096, 3.0))
    lifecycle.mute(alice, session.pk, "terms")
    lifecycle.unmute(alice, session.pk, "terms")
    for kind in ("replace", "truncate"):
        record = Edit.objects.create(session=session, kind=kind, start=1, author=alice)
        result = EditResult(kind, 1, 2, 2, 3, 11, " patient", " client")
        histories = [0.9, 0.8], [0.1, 0.2], [0.5, None]
        edit = events.edit_report(result, SIGNALS.alternatives, [" client"], *histories)
        lifecycle.record_edit_applied(session, record, edit)
    lifecycle.record_edit_refused(session, record, "The text changed")
    lifecycle.record_attention(session, events.attention(0, [[0.333333, 0.666667]], 2))
    lifecycle.record_attention_failed(session.pk, "No worker")
    lifecycle.resume(alice, session.pk)  # the session is paused: back to running
    lifecycle.record_generated(session, "eos")
    lifecycle.fail(session.pk, "Out of memory")

    floor = make_session(None)  # a gateway session: claimed from the domain's queue
    floor.domain.reviewers.add(alice)
    lifecycle.claim(alice, floor.pk)

    assert mismatches_of(session) == [] and mismatches_of(floor) == []
    assert set(kinds_of(session) + kinds_of(floor)) == set(events.KINDS)
    truncated = SessionEvent.objects.get(session=session, type="truncated").payload
    assert truncated["kind"] == "truncate" and "removed_from" not in truncated
    assert "removed_from" in SessionEvent.objects.get(session=session, type="rollback").payload
    assert SessionEvent.objects.get(session=session, type="token").payload["similarity"] == 0.4375
    assert truncated["tokens"] == [
        {"text": " client", "top1": 0.8, "entropy": 0.2, "similarity": None}
    ]


@pytest.mark.django_db
def test_it_replays_the_rollbacks_since_the_save(alice):
    session = make_session(alice, status=ReviewSession.RUNNING)
    ReviewSession.objects.filter(pk=session.pk).update(ids_seq=0)
    session.refresh_from_db()
    events.emit(session.pk, "rollback", {"removed_from": 2})
    assert record.recovered_ids(session) == [11, 12]


@pytest.mark.django_db
def test_it_renames_stored_events_to_the_kinds_of_the_protocol(alice):
    session = make_session(alice)
    for kind, payload in [
        ("paused", {"position": 5}),
        ("flagged", {"position": 2}),
        ("rolled_back", {"removed_from": 3}),
        ("rolled_back", {"kind": "truncate", "token_ids": [11]}),
        ("finished", {"reason": "eos"}),
        ("edited", {"kind": "replace"}),
    ]:
        store(session, kind, payload)
    migration = importlib.import_module("reviewer.migrations.0004_event_kinds")
    migration.forwards(apps, None)
    assert kinds_of(session) == ["pause", "flag", "rollback", "truncated", "finish", "edited"]
    migration.backwards(apps, None)
    old = ["paused", "flagged", "rolled_back", "rolled_back", "finished", "edited"]
    assert kinds_of(session) == old


PROMPT = "Write a short clinical note about a patient with high blood pressure and chest pain."


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.django_db(transaction=True)
def test_every_event_of_a_real_session_matches_its_declared_type(
    celery_worker_process, alice, plain_domain
):
    sid = lifecycle.start_session(alice, "Plain", PROMPT, seed=3, max_new_tokens=16)["id"]
    session = ReviewSession.objects.get(pk=sid)

    def has(kind: str, n: int = 1):
        return lambda: session.events.filter(type=kind).count() >= n

    def status(value: str):
        return lambda: ReviewSession.objects.get(pk=sid).status == value

    wait_for(has("token", 4), what="four tokens")
    lifecycle.pause(alice, sid)
    wait_for(status("paused"), what="the pause")
    lifecycle.attention(alice, sid, 2)
    wait_for(has("attention"), what="layer 2's heads")
    lifecycle.edit(alice, sid, 0, 0, "Note: ")
    wait_for(has("edited"), what="the edit")
    alternative = session.pauses.get().alternatives[0]["token_id"]
    lifecycle.choose(alice, sid, alternative)
    wait_for(has("edited", 2), what="the chosen alternative")
    lifecycle.rollback(alice, sid, 2)
    wait_for(has("truncated"), what="the rollback to position 2")
    lifecycle.resume(alice, sid)
    wait_for(status("generated"), what="the end")

    assert mismatches_of(session) == []
    seen = set(kinds_of(session))
    assert {"token", "pause", "attention", "edited", "truncated", "resumed", "finish"} <= seen
    # Every session stores its tokens' similarity to the prompt, drift policy or not.
    tokens = session.events.filter(type="token").values_list("payload", flat=True)
    assert all(-1 <= token["similarity"] <= 1 for token in tokens)
    edited = session.events.filter(type="edited").order_by("seq").last().payload["tokens"]
    assert edited and all(-1 <= token["similarity"] <= 1 for token in edited)
