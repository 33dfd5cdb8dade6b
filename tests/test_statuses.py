"""The one table of session statuses and transitions, and the services' use of it."""

from __future__ import annotations

import json

import pytest

from reviewer.lifecycle import transitions
from reviewer.models import ReviewSession, statuses
from tests.session_factory import make_session


def test_every_status_has_its_transitions_and_they_name_statuses():
    assert set(statuses.TRANSITIONS) == set(statuses.STATUSES) == set(statuses.LABELS)
    assert all(set(after) <= set(statuses.STATUSES) for after in statuses.TRANSITIONS.values())


def test_the_groups_are_read_off_the_table():
    assert {"completed", "rejected", "cancelled", "failed"} == statuses.FINAL
    assert {s for s in statuses.STATUSES if not statuses.TRANSITIONS[s]} < statuses.FINAL
    assert {"paused", "generated"} == statuses.DECIDABLE
    assert {"paused", "failed"} == statuses.RESUMABLE
    # A generated text is reopened by an edit, then resumed: its page keeps the controls.
    assert {"draft", "running", "paused", "generated", "failed"} == statuses.MAY_RUN
    assert {"draft", "running", "paused", "generated"} == statuses.CANCELLABLE


def test_the_table_is_plain_data_for_the_page():
    data = {"statuses": statuses.STATUSES, "groups": statuses.GROUPS, "labels": statuses.LABELS}
    assert json.loads(json.dumps({**data, "transitions": statuses.TRANSITIONS}))


@pytest.mark.django_db
def test_a_transition_the_table_does_not_list_is_refused(alice):
    session = make_session(alice, status=ReviewSession.COMPLETED)
    with pytest.raises(transitions.Conflict, match="completed cannot become running"):
        transitions.set_status(session, ReviewSession.RUNNING)
    session.refresh_from_db()
    assert session.status == ReviewSession.COMPLETED
