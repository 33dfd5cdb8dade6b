"""A command made on offsets says which text it was made on (``seen_length``, and for an
edit the span's words, ``seen``): on another text it is refused with 409 and the code
``text_changed``, and nothing changes; a page offline while another tab's edit landed would
otherwise edit other words than the reviewer chose."""

from __future__ import annotations

import pytest
from django.test import Client

from reviewer import lifecycle
from reviewer.models import AuditRecord, Edit, ReviewSession
from tests.db_snapshot import snapshot
from tests.session_factory import ALTERNATIVES, TEXT, make_session, stub_worker

pytestmark = pytest.mark.django_db

SPAN = (4, 11)  # "patient"


@pytest.fixture
def session(alice, monkeypatch):
    stub_worker(monkeypatch)
    return make_session(alice)


def refused(run) -> lifecycle.CommandError:
    before = (Edit.objects.count(), AuditRecord.objects.count())
    with pytest.raises(lifecycle.Conflict) as caught:
        run()
    assert (Edit.objects.count(), AuditRecord.objects.count()) == before
    assert caught.value.status == 409 and caught.value.code == "text_changed"
    return caught.value


def test_it_refuses_an_edit_made_on_a_text_of_another_length(alice, session):
    error = refused(
        lambda: lifecycle.edit(
            alice, session.pk, *SPAN, "woman", seen_length=len(TEXT) - 3, seen="patient"
        )
    )
    assert "The text changed since this command was made" in str(error)


def test_it_refuses_an_edit_whose_span_now_holds_other_words(alice, session):
    refused(
        lambda: lifecycle.edit(
            alice, session.pk, *SPAN, "woman", seen_length=len(TEXT), seen="patron"
        )
    )


def test_it_takes_an_edit_made_on_the_text_as_it_is(alice, session):
    result = lifecycle.edit(
        alice, session.pk, *SPAN, "woman", seen_length=len(TEXT), seen="patient"
    )
    assert Edit.objects.get(pk=result["edit"]).text_before == "patient"


def test_it_takes_an_edit_that_does_not_say_what_it_saw(alice, session):
    # The API's clients before these fields: the offsets are taken as they come.
    assert "edit" in lifecycle.edit(alice, session.pk, *SPAN, "woman")


def test_it_refuses_a_rollback_and_a_choice_made_on_another_text(alice, session):
    refused(lambda: lifecycle.rollback(alice, session.pk, 2, seen_length=len(TEXT) + 1))
    token = ALTERNATIVES[0]["token_id"]
    refused(lambda: lifecycle.choose(alice, session.pk, token, seen_length=len(TEXT) + 1))


def test_it_takes_a_rollback_made_on_the_text_as_it_is(alice, session):
    assert "edit" in lifecycle.rollback(alice, session.pk, 2, seen_length=len(TEXT))


def test_it_counts_the_text_in_characters_as_the_offsets_are(alice, monkeypatch):
    stub_worker(monkeypatch)
    session = make_session(alice)
    ReviewSession.objects.filter(pk=session.pk).update(text="Fever 🤒 since Monday.")
    # 21 code points (the emoji is one; a browser's string counts it as two units)
    assert "edit" in lifecycle.edit(alice, session.pk, 8, 13, "from", seen_length=21, seen="since")


def test_it_answers_the_api_with_the_code(alice, session):
    client = Client()
    client.force_login(alice)
    before = snapshot()
    response = client.post(
        f"/api/sessions/{session.pk}/edit",
        {"start": 4, "end": 11, "text": "woman", "seen_length": 3, "seen": "patient"},
        content_type="application/json",
    )
    assert response.status_code == 409
    assert response.json()["code"] == "text_changed"
    assert snapshot() == before


def test_it_names_the_refusal_for_an_edit_on_its_way(alice, paused_with_pending_edit):
    client = Client()
    client.force_login(alice)
    response = client.post(
        f"/api/sessions/{paused_with_pending_edit.pk}/approve", {}, content_type="application/json"
    )
    assert response.status_code == 409
    assert response.json()["code"] == "edit_pending"


def test_it_refuses_a_seen_length_that_is_not_a_count(alice, session):
    client = Client()
    client.force_login(alice)
    response = client.post(
        f"/api/sessions/{session.pk}/rollback",
        {"position": 2, "seen_length": "24"},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "seen_length" in response.json()["error"]


def test_it_checks_the_words_seen_even_without_the_length(alice, session):
    refused(lambda: lifecycle.edit(alice, session.pk, *SPAN, "woman", seen="patron"))


def test_it_refuses_a_range_outside_the_text_as_such_when_the_length_is_the_one_seen(
    alice, session
):
    with pytest.raises(lifecycle.CommandError) as caught:
        lifecycle.edit(alice, session.pk, 30, 33, "x", seen_length=len(TEXT), seen="abc")
    assert caught.value.status == 400 and "outside the text" in str(caught.value)
    # A page that saw a longer text is told the text changed: it reads it again.
    refused(lambda: lifecycle.edit(alice, session.pk, 30, 33, "x", seen_length=40, seen="abc"))
