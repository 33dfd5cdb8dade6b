"""A reviewer's command while Redis is out of reach: refused clearly (503, nothing changed)
when its flag cannot be set, and a session whose task cannot be queued says so and can be
resumed, instead of waiting for work that was never sent."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from kombu.exceptions import OperationalError

from reviewer import lifecycle
from reviewer.models import AuditRecord, ReviewSession
from reviewer.worker import dispatch
from tests.conftest import free_port
from tests.db_snapshot import snapshot
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db
S = ReviewSession


@pytest.fixture
def redis_away(settings):
    """Redis at an address where nothing listens; a one-second grace keeps the test short."""
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    settings.CAESURA_REDIS_GRACE_S = 1


@pytest.fixture
def api(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def post(client: Client, url: str, body: dict | None = None):
    return client.post(url, body or {}, content_type="application/json")


def test_it_refuses_a_pause_it_cannot_pass_on_and_changes_nothing(
    api, alice, redis_away, django_capture_on_commit_callbacks
):
    session = make_session(alice, status=S.RUNNING)
    before = snapshot()
    with django_capture_on_commit_callbacks(execute=True):
        response = post(api, f"/api/sessions/{session.pk}/pause", {"command_id": "p-1"})
    assert response.status_code == 503
    assert "Redis is out of reach" in response.json()["error"]
    assert "try again" in response.json()["error"]
    assert snapshot() == before  # no audit record of a pause that was never asked for


def test_it_refuses_a_resume_it_cannot_clear_the_way_for_and_changes_nothing(
    api, alice, redis_away, django_capture_on_commit_callbacks
):
    session = make_session(alice)
    before = snapshot()
    with django_capture_on_commit_callbacks(execute=True):
        response = post(api, f"/api/sessions/{session.pk}/resume")
    assert response.status_code == 503
    assert snapshot() == before


def test_it_answers_a_socket_command_during_the_outage_with_a_503_frame(
    alice, redis_away, django_capture_on_commit_callbacks
):
    from reviewer.web import command_table

    session = make_session(alice, status=S.RUNNING)
    with pytest.raises(lifecycle.Unavailable) as refused:
        command_table.run(alice, session.pk, "pause", {"command": "pause"})
    assert refused.value.status == 503
    assert not AuditRecord.objects.filter(session=session, action="pause_requested").exists()


def test_it_fails_a_resumed_session_whose_segment_could_not_be_queued_and_resumes_it_later(
    api, alice, monkeypatch, django_capture_on_commit_callbacks
):
    session = make_session(alice)
    sent: list[tuple] = []

    def broker_away(args, holder):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(dispatch, "segment", broker_away)
    with django_capture_on_commit_callbacks(execute=True):
        response = post(api, f"/api/sessions/{session.pk}/resume")
    assert response.status_code == 200  # the resume itself was taken and audited
    session.refresh_from_db()
    assert session.status == S.FAILED
    assert session.error == lifecycle.QUEUE_UNREACHABLE
    errors = [json.dumps(e.payload) for e in session.events.filter(type="error")]
    assert any("resume it to try again" in e for e in errors)

    monkeypatch.setattr(dispatch, "segment", lambda args, holder: sent.append(args))
    with django_capture_on_commit_callbacks(execute=True):
        response = post(api, f"/api/sessions/{session.pk}/resume")
    assert response.status_code == 200
    session.refresh_from_db()
    assert session.status == S.RUNNING and session.error == ""
    assert sent == [(session.pk, session.segment)]
