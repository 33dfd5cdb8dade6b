"""A segment's task leaves before the status change is broadcast: the worker starts on the
prefill (or the resume) while the page and the queue hear of it, not after."""

from __future__ import annotations

import pytest

from reviewer import events, lifecycle
from reviewer.lifecycle import gateway
from reviewer.models import ReviewSession
from reviewer.worker import dispatch
from tests.floor_factory import note_drafter
from tests.session_factory import clinical_notes, make_session

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(monkeypatch) -> list[str]:
    """What left after each commit, in order: "task" or the broadcast events' types."""
    order: list[str] = []
    monkeypatch.setattr(dispatch, "segment", lambda args, holder: order.append("task"))
    monkeypatch.setattr(
        events, "broadcast_all", lambda stored: order.extend(e.type for e in stored)
    )
    return order


@pytest.mark.model  # the prompt is counted against the context with the model's tokenizer
def test_it_sends_a_gateway_generations_task_before_its_status(sent):
    domain = clinical_notes()
    note_drafter().domains.add(domain)
    messages = [{"role": "user", "content": "Summarise the visit."}]
    gateway.start_generation(note_drafter(), domain, "Summarise the visit.", messages, {}, {})
    assert sent[0] == "task"
    assert events.STATUS in sent[1:]


@pytest.mark.model
def test_it_sends_a_reviewers_session_task_before_its_status(alice, plain_domain, sent):
    lifecycle.start_session(alice, "Plain", "Describe a lighthouse.", seed=1, max_new_tokens=8)
    assert sent[0] == "task"
    assert events.STATUS in sent[1:]


def test_it_sends_a_resumed_sessions_task_before_its_status(alice, sent):
    session = make_session(alice, status=ReviewSession.PAUSED)
    lifecycle.resume(alice, session.pk)
    assert sent[0] == "task"
    assert events.STATUS in sent[1:] and events.RESUMED in sent[1:]
