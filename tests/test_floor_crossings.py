"""Crossings on a review floor, reviewer side: a reviewer sees only their domains' queues. Carol
reviews contracts; the clinical floor's ownerless session must be invisible to her on every
path (HTTP API, pages, websocket), and nothing she tries changes it. A reviewer's API token and
an application's key are different principals: neither opens the other's door."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.test import Client

from reviewer.lifecycle import application_keys
from reviewer.models import ApiToken, AuditRecord, Domain, ReviewSession
from reviewer.web.auth import digest, issue_token
from reviewer.web.command_table import COMMANDS
from reviewer.web.consumers import NOT_FOUND
from tests.session_factory import clinical_notes, make_session, stub_worker
from webapp.asgi import application

pytestmark = pytest.mark.django_db

# A body each command would accept, so that what refuses it is the crossing, not the input.
BODIES: dict[str, dict[str, Any]] = {
    "rollback": {"position": 2},
    "edit": {"start": 0, "end": 3, "text": "A"},
    "choose": {"token_id": 42},
    "approve": {"comment": "fine"},
    "reject": {"comment": "no"},
    "attention": {"layer": 0},
    "mute": {"policy": "any"},
    "unmute": {"policy": "any"},
    "reassign": {"reviewer": "carol"},
    "correct_task": {"task_type": "deterministic"},
}


@pytest.fixture(autouse=True)
def no_worker(monkeypatch) -> list[int]:
    return stub_worker(monkeypatch)


@pytest.fixture
def carol(django_user_model):
    """Carol reviews contracts, not clinical notes."""
    user = django_user_model.objects.create_user("carol", password="carol-password-1")
    contracts = Domain.objects.create(
        name="Contracts", slug="contracts", specialty="legal", system_prompt="Draft."
    )
    contracts.reviewers.add(user)
    return user


@pytest.fixture
def floor(alice):
    """Alice reviews clinical notes; the waiting session came from an application."""
    clinical_notes().reviewers.add(alice)
    return make_session(None)


def token_client(user) -> Client:
    return Client(headers={"Authorization": f"Token {issue_token(user)}"})


def state(session: ReviewSession) -> tuple[Any, ...]:
    """Everything a crossing could change about a session."""
    session.refresh_from_db()
    return (
        session.status,
        session.text,
        session.generated_ids,
        session.claimed_by_id,
        session.claim_expires_at,
        session.owner_id,
        session.events.count(),
        session.edits.count(),
        AuditRecord.objects.count(),
    )


def test_it_hides_another_domains_session_on_every_http_path(floor, alice, carol, no_worker):
    api = token_client(carol)  # issuing her key is audited: before the crossing
    before = state(floor)
    assert floor.pk not in [s["id"] for s in api.get("/api/sessions").json()["sessions"]]
    for path in ("", "/events", "/redline"):
        response = api.get(f"/api/sessions/{floor.pk}{path}")
        assert response.status_code == 404, path
        assert response.json() == {"error": f"Session {floor.pk} not found"}  # as if none
    for name in COMMANDS:
        response = api.post(
            f"/api/sessions/{floor.pk}/{name}", BODIES.get(name, {}), "application/json"
        )
        assert response.status_code == 404, name
    pages = Client()
    pages.force_login(carol)
    for path in (f"/sessions/{floor.pk}/", f"/sessions/{floor.pk}/audit"):
        assert pages.get(path).status_code == 404, path
    assert state(floor) == before and no_worker == []
    # The same paths are open to the domain's own reviewer: the 404s above are the crossing.
    assert token_client(alice).get(f"/api/sessions/{floor.pk}").status_code == 200


def test_it_hides_a_colleagues_own_session_from_a_reviewer_of_the_same_domain(alice, bob):
    clinical_notes().reviewers.add(alice, bob)
    mine = make_session(alice)
    api = token_client(bob)  # issuing his key is audited: before the crossing
    before = state(mine)
    assert api.get(f"/api/sessions/{mine.pk}").status_code == 404
    assert api.post(f"/api/sessions/{mine.pk}/claim", {}, "application/json").status_code == 404
    assert state(mine) == before


def test_it_refuses_an_application_key_on_the_reviewer_api(floor, alice):
    _, key = application_keys.create("Note drafter", [clinical_notes()], "root")
    for header in (f"Bearer {key}", f"Token {key}"):
        client = Client(headers={"Authorization": header})
        assert client.get("/api/sessions").status_code == 401, header
        assert client.get(f"/api/sessions/{floor.pk}").status_code == 401, header
        answer = client.post(f"/api/sessions/{floor.pk}/claim", {}, "application/json")
        assert answer.status_code == 401, header
    floor.refresh_from_db()
    assert floor.claimed_by is None


def test_it_does_not_take_a_reviewers_token_for_an_application_key(alice):
    application_keys.create("Note drafter", [clinical_notes()], "root")
    token = issue_token(alice)
    assert application_keys.application_for(token) is None
    assert application_keys.application_for(f"Token {token}") is None
    # Even a token that looked like an application key is looked up among tokens only.
    ApiToken.objects.filter(user=alice).update(key=digest("cae_forged"))
    assert application_keys.application_for("cae_forged") is None


@database_sync_to_async
def session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def connected(user, session_id: int) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://localhost"), (b"cookie", await session_cookie(user))]
    communicator = WebsocketCommunicator(application, f"/ws/sessions/{session_id}/", headers)
    accepted, _ = await communicator.connect(timeout=5)
    assert accepted  # accepted first, so that a refusal arrives as a close code
    return communicator


@pytest.mark.django_db(transaction=True)
async def test_it_refuses_the_socket_of_another_domains_session(alice, carol):
    clinical = await database_sync_to_async(clinical_notes)()
    await database_sync_to_async(clinical.reviewers.add)(alice)
    floor = await database_sync_to_async(make_session)(None)
    try:
        refused = await connected(carol, floor.pk)
        output = await refused.receive_output(timeout=3)
        assert output == {"type": "websocket.close", "code": NOT_FOUND}
        member = await connected(alice, floor.pk)
        assert await member.receive_nothing(timeout=1)  # a member's socket stays open
        await member.disconnect()
    finally:
        await database_sync_to_async(connections.close_all)()
