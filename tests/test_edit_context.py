"""An edit is checked against the real model's tokenizer and context before it is stored."""

import pytest
from django.test import override_settings

from reviewer import lifecycle
from reviewer.lifecycle import transitions
from reviewer.models import ReviewSession
from tests.db_snapshot import snapshot
from tests.session_factory import make_session

pytestmark = [pytest.mark.model, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def no_worker(monkeypatch):
    monkeypatch.setattr(transitions, "dispatch_segment", lambda session: None)


@override_settings(CAESURA_MAX_EDIT_CHARS=200_000)
def test_it_refuses_an_edit_that_would_overflow_the_context_and_stores_nothing(alice):
    from reviewer.web.tokenizer import context_length

    session = make_session(alice)
    before = snapshot()
    huge = " fever" * context_length()
    with pytest.raises(lifecycle.InvalidInput, match="Edit too long.*context"):
        lifecycle.edit(alice, session.pk, 0, len(session.text), huge)
    assert snapshot() == before


def test_it_counts_the_prompt_the_worker_recorded(alice):
    from reviewer.web.tokenizer import context_length, text_length

    session = make_session(alice, max_new_tokens=1)
    edited = "The woman has a fever."
    room = text_length(edited)
    # A prompt that leaves exactly the room the edited text needs: it fits; one token less does not.
    ReviewSession.objects.filter(pk=session.pk).update(prompt_ids=[1] * (context_length() - room))
    assert "edit" in lifecycle.edit(alice, session.pk, 0, 11, "The woman")
    other = make_session(alice, max_new_tokens=1)
    ReviewSession.objects.filter(pk=other.pk).update(prompt_ids=[1] * (context_length() - room + 1))
    before = snapshot()
    with pytest.raises(lifecycle.InvalidInput, match="Edit too long"):
        lifecycle.edit(alice, other.pk, 0, 11, "The woman")
    assert snapshot() == before


def test_it_keeps_room_for_the_tokens_still_to_generate(alice):
    from reviewer.web.tokenizer import context_length

    session = make_session(alice, max_new_tokens=context_length())
    ReviewSession.objects.filter(pk=session.pk).update(prompt_ids=[1] * 5)
    with pytest.raises(lifecycle.InvalidInput, match="context"):
        lifecycle.edit(alice, session.pk, 0, 3, "A")
