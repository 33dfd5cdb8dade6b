"""Who may call the API: a session cookie with CSRF, or a token; nobody else."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.test import Client

from reviewer.models import ApiToken, ReviewSession
from reviewer.web.auth import digest, issue_token
from tests.session_factory import make_session, stub_worker

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def dispatched(monkeypatch) -> list[int]:
    return stub_worker(monkeypatch)


def token_client(key: str) -> Client:
    return Client(enforce_csrf_checks=True, headers={"Authorization": f"Token {key}"})


def test_it_refuses_anonymous_requests(client):
    response = client.get("/api/sessions")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert "error" in response.json()


def test_it_refuses_anonymous_commands(client, alice):
    session = make_session(alice)
    response = client.post(f"/api/sessions/{session.pk}/resume", content_type="application/json")
    assert response.status_code == 401
    session.refresh_from_db()
    assert session.status == "paused"


def test_it_refuses_a_bad_token(alice):
    issue_token(alice)
    response = token_client("not-the-key").get("/api/sessions")
    assert response.status_code == 401
    assert response.json() == {"error": "Invalid token"}


def test_it_refuses_another_scheme(alice):
    client = Client(headers={"Authorization": "Bearer abc"})
    assert client.get("/api/sessions").status_code == 401


def test_it_refuses_a_bad_token_even_with_a_session_cookie(alice):
    client = Client(headers={"Authorization": "Token wrong"})
    client.force_login(alice)
    assert client.get("/api/sessions").status_code == 401


def test_it_refuses_the_token_of_an_inactive_user(alice):
    key = issue_token(alice)
    alice.is_active = False
    alice.save()
    assert token_client(key).get("/api/sessions").status_code == 401


def test_it_authenticates_by_token_without_csrf(alice):
    session = make_session(alice)
    client = token_client(issue_token(alice))
    assert client.get("/api/sessions").json()["sessions"][0]["id"] == session.pk
    response = client.post(f"/api/sessions/{session.pk}/resume", content_type="application/json")
    assert response.status_code == 200
    assert response.json()["status"] == "running"


def test_it_keeps_only_a_digest_of_the_key(alice):
    key = issue_token(alice)
    stored = ApiToken.objects.get(user=alice).key
    assert stored == digest(key)
    assert key not in stored


def test_it_refuses_a_cookie_post_without_csrf_token(alice):
    session = make_session(alice)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(f"/api/sessions/{session.pk}/resume", content_type="application/json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]
    session.refresh_from_db()
    assert session.status == "paused"


def test_it_accepts_a_cookie_post_with_csrf_token(alice):
    session = make_session(alice)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    client.get("/login/")  # sets the csrftoken cookie
    csrf = client.cookies["csrftoken"].value
    response = client.post(
        f"/api/sessions/{session.pk}/resume",
        content_type="application/json",
        headers={"X-CSRFToken": csrf},
    )
    assert response.status_code == 200


def test_it_allows_cookie_gets_without_csrf_token(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.get("/api/sessions").status_code == 200


def test_it_creates_a_token_for_the_caller(alice):
    client = Client()
    client.force_login(alice)
    response = client.post("/api/token")
    assert response.status_code == 201
    key = response.json()["key"]
    assert token_client(key).get("/api/sessions").status_code == 200


def test_it_rotates_a_token(alice):
    old = issue_token(alice)
    response = token_client(old).post("/api/token")
    new = response.json()["key"]
    assert new != old
    assert token_client(old).get("/api/sessions").status_code == 401
    assert token_client(new).get("/api/sessions").status_code == 200
    assert ApiToken.objects.count() == 1


def test_it_scopes_a_token_to_its_user(alice, bob):
    session = make_session(alice)
    client = token_client(issue_token(bob))
    assert client.get(f"/api/sessions/{session.pk}").status_code == 404


def test_it_creates_a_token_from_the_command_line(alice, capsys):
    call_command("create_api_token", "alice")
    key = capsys.readouterr().out.strip()
    assert token_client(key).get("/api/sessions").status_code == 200


def test_it_lets_an_admin_create_a_token(admin_user, alice):
    client = Client()
    client.force_login(admin_user)
    response = client.post("/admin/reviewer/apitoken/add/", {"user": alice.pk}, follow=True)
    assert response.status_code == 200
    [message] = [str(m) for m in response.context["messages"] if "copy it now" in str(m)]
    key = message.split(": ")[1].split(" ")[0]
    assert token_client(key).get("/api/sessions").status_code == 200


def test_it_keeps_the_audit_chain_read_only_in_the_admin(admin_user, alice):
    session = make_session(alice, status=ReviewSession.GENERATED)
    token_client(issue_token(alice)).post(
        f"/api/sessions/{session.pk}/approve", content_type="application/json"
    )
    client = Client()
    client.force_login(admin_user)
    assert client.get("/admin/reviewer/auditrecord/").status_code == 200
    assert client.get("/admin/reviewer/auditrecord/add/").status_code == 403
    assert client.get(f"/admin/reviewer/reviewsession/{session.pk}/change/").status_code == 200


def test_it_shows_the_review_records_in_the_admin(admin_user, alice):
    session = make_session(alice)
    issue_token(alice)
    client = Client()
    client.force_login(admin_user)
    for model in ("pausepolicy", "reviewsession", "pauseevent", "edit", "auditrecord", "apitoken"):
        assert client.get(f"/admin/reviewer/{model}/").status_code == 200, model
    pause = session.pauses.get()
    assert client.get(f"/admin/reviewer/pauseevent/{pause.pk}/change/").status_code == 200
    assert client.get("/admin/reviewer/reviewsession/add/").status_code == 403


def test_it_lets_staff_issue_tokens_for_themselves_only(django_user_model, alice):
    from reviewer.models import AuditRecord

    staff = django_user_model.objects.create_user("sam", password="sam-password-1", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename__endswith="_apitoken"))
    issue_token(alice)
    client = Client()
    client.force_login(staff)
    refused = client.post("/admin/reviewer/apitoken/add/", {"user": alice.pk})
    assert (
        refused.status_code == 200
        and "not one of the available choices" in refused.content.decode()
    )
    before = ApiToken.objects.get(user=alice).key
    client.post(
        "/admin/reviewer/apitoken/",
        {"action": "rotate", "_selected_action": [ApiToken.objects.get(user=alice).pk]},
    )
    assert ApiToken.objects.get(user=alice).key == before  # alice keeps her key
    client.post("/admin/reviewer/apitoken/add/", {"user": staff.pk})
    assert AuditRecord.objects.filter(action="api_token_issued", actor="sam").count() == 1
