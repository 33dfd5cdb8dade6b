"""A repeated gateway call follows the generation it repeats instead of starting another: a
timed-out call's automatic retry must not put a second copy in front of the reviewers, and an
Idempotency-Key names one generation for good.

Persona: "Note drafter" is an application bound to Clinical notes."""

from __future__ import annotations

import pytest

from reviewer.lifecycle import gateway
from reviewer.lifecycle.transitions import Conflict
from reviewer.models import ReviewSession
from reviewer.worker import dispatch
from tests.floor_factory import note_drafter
from tests.session_factory import clinical_notes

pytestmark = [pytest.mark.django_db, pytest.mark.model]  # the prompt is counted: the tokenizer

MESSAGES = [{"role": "user", "content": "Summarise the visit."}]


@pytest.fixture(autouse=True)
def no_worker(monkeypatch):
    monkeypatch.setattr(dispatch, "segment", lambda args, holder: None)


def call(replay: gateway.Replay) -> ReviewSession:
    domain = clinical_notes()
    note_drafter().domains.add(domain)
    app = note_drafter()
    return gateway.start_or_join(
        app,
        replay,
        lambda: gateway.start_generation(
            app, domain, "Summarise the visit.", MESSAGES, {}, {}, replay
        ),
    )


def test_it_joins_a_retry_to_the_unanswered_generation_it_repeats():
    first = call(gateway.Replay("a" * 64))
    retry = call(gateway.Replay("a" * 64, retried=True))
    assert retry.pk == first.pk
    assert ReviewSession.objects.count() == 1


def test_it_starts_anew_for_a_call_that_is_no_retry_or_repeats_an_answered_one():
    first = call(gateway.Replay("a" * 64))
    assert call(gateway.Replay("a" * 64)).pk != first.pk  # the same body, asked again
    gateway.mark_answered(first.pk)
    second = ReviewSession.objects.exclude(pk=first.pk).get()
    gateway.mark_answered(second.pk)
    assert call(gateway.Replay("a" * 64, retried=True)).pk not in (first.pk, second.pk)
    assert call(gateway.Replay("b" * 64, retried=True)).request_digest == "b" * 64


def test_it_answers_an_idempotency_key_from_its_generation_and_refuses_it_for_another_body():
    first = call(gateway.Replay("a" * 64, key="visit-42"))
    gateway.mark_answered(first.pk)
    assert call(gateway.Replay("a" * 64, key="visit-42")).pk == first.pk
    with pytest.raises(Conflict, match="visit-42.*another request"):
        call(gateway.Replay("b" * 64, key="visit-42"))
    assert ReviewSession.objects.count() == 1
    assert call(gateway.Replay("a" * 64, key="visit-43")).pk != first.pk


def test_a_call_that_waited_at_the_limit_joins_the_generation_its_key_started(monkeypatch):
    """Two calls with one Idempotency-Key at once, the application one place from its limit:
    both looked for the key before either stored it; the second waited for the application's
    lock while the first took the last place. It follows the first, not a 429."""
    app = note_drafter()
    app.max_concurrent = 1
    app.save(update_fields=["max_concurrent"])
    first = call(gateway.Replay("a" * 64, "key-1"))
    looked = iter([None])  # the second call's first look came before the first's commit
    real = gateway.generation_to_join
    monkeypatch.setattr(gateway, "generation_to_join", lambda a, r: next(looked, real(a, r)))
    assert call(gateway.Replay("a" * 64, "key-1")).pk == first.pk
    assert ReviewSession.objects.count() == 1
