"""Login throttling (django-axes): after a handful of failures an account, and the address they
came from, are locked for a while; the login page says so, and the lockout is audited and logged.
Attempts live in the test database, so every test starts with none."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user
from django.test import Client
from django.utils import timezone

from reviewer.models import AuditRecord
from webapp.env import env_lockout_parameters

pytestmark = pytest.mark.django_db

ALICE_PASSWORD = "alice-password-1"


def attempt(client: Client, username: str, password: str, path: str = "/login/", **extra):
    return client.post(path, {"username": username, "password": password, "next": "/"}, **extra)


def fail(client: Client, username: str, times: int, path: str = "/login/", **extra) -> None:
    for _ in range(times):
        response = attempt(client, username, "wrong-password", path, **extra)
        assert response.status_code in (200, 429)


def test_it_still_logs_in_with_the_right_password(client, alice):
    response = attempt(client, "alice", ALICE_PASSWORD)
    assert response.status_code == 302 and get_user(client) == alice


def test_it_locks_an_account_after_the_failure_limit_even_with_the_right_password(
    client, alice, settings
):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert attempt(client, "alice", "wrong-password").status_code == 200  # "didn't match"
    assert attempt(client, "alice", "wrong-password").status_code == 429  # the one that locks
    response = attempt(client, "alice", ALICE_PASSWORD, HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 429
    page = response.content.decode()
    assert 'id="locked-out"' in page and "locked for 15 minutes" in page
    assert 'name="password"' in page  # the app's own login page, not a bare text
    assert not get_user(client).is_authenticated


def test_it_says_so_in_the_readers_language(client, alice, settings):
    fail(client, "alice", settings.AXES_FAILURE_LIMIT)
    response = attempt(client, "alice", ALICE_PASSWORD, HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert response.status_code == 429
    assert "登录失败次数过多" in response.content.decode()


def test_it_locks_the_admin_login_too(client, admin_user, settings):
    fail(client, "root", settings.AXES_FAILURE_LIMIT, path="/admin/login/")
    response = attempt(client, "root", "root-password-1", path="/admin/login/")
    assert response.status_code == 429 and b'id="locked-out"' in response.content
    assert not get_user(client).is_authenticated


def test_it_locks_the_account_from_any_address_and_the_address_for_any_account(
    alice, bob, settings
):
    fail(Client(REMOTE_ADDR="10.0.0.1"), "alice", settings.AXES_FAILURE_LIMIT)
    elsewhere = Client(REMOTE_ADDR="10.0.0.2")
    assert attempt(elsewhere, "alice", ALICE_PASSWORD).status_code == 429
    same_address = Client(REMOTE_ADDR="10.0.0.1")
    assert attempt(same_address, "bob", "bob-password-1").status_code == 429
    unrelated = Client(REMOTE_ADDR="10.0.0.3")
    assert attempt(unrelated, "bob", "bob-password-1").status_code == 302


def test_it_lets_the_account_in_again_after_the_cool_off(client, alice, settings):
    fail(client, "alice", settings.AXES_FAILURE_LIMIT)
    assert attempt(client, "alice", ALICE_PASSWORD).status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert attempt(client, "alice", ALICE_PASSWORD).status_code == 302


def test_it_forgets_failures_after_a_successful_login(client, alice, settings):
    fail(client, "alice", settings.AXES_FAILURE_LIMIT - 1)
    assert attempt(client, "alice", ALICE_PASSWORD).status_code == 302
    client.post("/logout/")
    fail(client, "alice", settings.AXES_FAILURE_LIMIT - 1)
    assert attempt(client, "alice", ALICE_PASSWORD).status_code == 302


def test_it_audits_the_lockout_once_and_logs_every_refused_attempt(client, alice, settings, caplog):
    with caplog.at_level(logging.WARNING, logger="reviewer.web.lockout"):
        fail(client, "alice", settings.AXES_FAILURE_LIMIT + 2, REMOTE_ADDR="10.9.8.7")
    records = AuditRecord.objects.filter(action="login_locked_out")
    assert records.count() == 1
    record = records.get()
    assert record.session is None and record.actor == "alice"
    assert record.payload["ip_address"] == "10.9.8.7"
    assert record.payload["failures"] == settings.AXES_FAILURE_LIMIT
    lines = [r.getMessage() for r in caplog.records if r.name == "reviewer.web.lockout"]
    assert len(lines) == 3 and all("alice" in line and "10.9.8.7" in line for line in lines)


def test_it_reads_what_a_lockout_is_keyed_on_from_the_environment(monkeypatch):
    monkeypatch.setenv("LOCK_BY", "username+ip_address")
    assert env_lockout_parameters("LOCK_BY", []) == [["username", "ip_address"]]
    monkeypatch.setenv("LOCK_BY", "username, ip_address")
    assert env_lockout_parameters("LOCK_BY", []) == ["username", "ip_address"]
    monkeypatch.setenv("LOCK_BY", "password")
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="LOCK_BY"):
        env_lockout_parameters("LOCK_BY", [])


def test_it_shows_the_attempts_to_staff_who_can_unlock_by_deleting_them(
    client, alice, admin_user, settings
):
    fail(Client(), "alice", settings.AXES_FAILURE_LIMIT)
    client.force_login(admin_user)
    page = client.get("/admin/axes/accessattempt/").content.decode()
    assert "alice" in page
    AccessAttempt.objects.filter(username="alice").delete()
    assert attempt(Client(), "alice", ALICE_PASSWORD).status_code == 302
