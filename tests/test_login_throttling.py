"""Login throttling (django-axes) on a floor: after a handful of failures an account is locked
(from any address) for a while that grows with each lockout; the address the failures came from
is locked only past a much higher limit, because a floor's reviewers share one address. The login
page says so, and each lockout is audited and logged. Attempts live in the test database, so
every test starts with none."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib.auth import get_user
from django.db import connection
from django.test import Client
from django.utils import timezone

from reviewer.models import AuditRecord
from webapp.env import env_lockout_parameters

pytestmark = pytest.mark.django_db

ALICE_PASSWORD = "alice-password-1"


@pytest.fixture(autouse=True)
def quick_hashes(settings):
    """Dozens of logins per test: a fast hasher (set before the users' fixtures make them)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def age_attempts(minutes: int) -> None:
    """As if the last failure were ``minutes`` ago: attempts and their expiry move back alike."""
    for record in AccessAttempt.objects.select_related("expiration"):
        shift = record.attempt_time - (timezone.now() - timedelta(minutes=minutes))
        record.attempt_time -= shift
        record.save(update_fields=["attempt_time"])
        record.expiration.expires_at -= shift
        record.expiration.save(update_fields=["expires_at"])


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


def test_it_locks_the_account_from_any_address_but_not_its_neighbours_behind_one_address(
    alice, bob, settings
):
    floor = "10.0.0.1"  # the hospital's NAT: every reviewer's address
    fail(Client(REMOTE_ADDR=floor), "alice", settings.AXES_FAILURE_LIMIT)
    assert attempt(Client(REMOTE_ADDR=floor), "alice", ALICE_PASSWORD).status_code == 429
    elsewhere = Client(REMOTE_ADDR="10.0.0.2")
    assert attempt(elsewhere, "alice", ALICE_PASSWORD).status_code == 429  # the account is locked
    neighbour = Client(REMOTE_ADDR=floor)
    response = attempt(neighbour, "bob", "bob-password-1")
    assert response.status_code == 302 and get_user(neighbour) == bob


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
    monkeypatch.setenv("LOCK_BY", "username,username+ip_address")  # the default
    assert env_lockout_parameters("LOCK_BY", []) == ["username", ["username", "ip_address"]]
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


def test_it_locks_the_address_only_past_its_own_much_higher_limit(
    alice, bob, django_user_model, settings
):
    settings.CAESURA_LOGIN_ADDRESS_FAILURE_LIMIT = 3 * settings.AXES_FAILURE_LIMIT
    floor = "10.0.0.1"
    names = ["carol", "dave", "erin"]  # each stays below the account limit
    for name in names:
        fail(Client(REMOTE_ADDR=floor), name, settings.AXES_FAILURE_LIMIT - 1)
    assert attempt(Client(REMOTE_ADDR=floor), "bob", "bob-password-1").status_code == 302
    fail(Client(REMOTE_ADDR=floor), "frank", 3)  # the address's limit
    assert attempt(Client(REMOTE_ADDR=floor), "alice", ALICE_PASSWORD).status_code == 429
    assert attempt(Client(REMOTE_ADDR="10.0.0.2"), "alice", ALICE_PASSWORD).status_code == 302
    record = AuditRecord.objects.get(action="login_locked_out")
    assert record.payload["scope"] == "address" and record.payload["ip_address"] == floor
    assert record.payload["failures"] == settings.CAESURA_LOGIN_ADDRESS_FAILURE_LIMIT
    assert record.payload["minutes"] == 15


def test_it_doubles_each_further_lockout_of_the_same_account_up_to_the_cap(client, alice, settings):
    settings.CAESURA_LOGIN_LOCKOUT_MAX_MINUTES = 45
    for expected in (15, 30, 45):
        fail(client, "alice", settings.AXES_FAILURE_LIMIT - 1)
        response = attempt(client, "alice", "wrong-password", HTTP_ACCEPT_LANGUAGE="en")
        assert f"locked for {expected} minutes" in response.content.decode()
        age_attempts(expected - 1)
        assert attempt(client, "alice", ALICE_PASSWORD).status_code == 429  # still locked
        age_attempts(expected + 1)
        assert attempt(client, "alice", ALICE_PASSWORD).status_code == 302
        client.post("/logout/")
    minutes = AuditRecord.objects.filter(action="login_locked_out").values_list(
        "payload__minutes", flat=True
    )
    assert list(minutes) == [15, 30, 45]


def test_it_keeps_a_backed_off_lockout_when_other_failures_clean_up_old_attempts(
    alice, bob, settings
):
    for _ in range(2):  # a second lockout: 30 minutes
        fail(Client(), "alice", settings.AXES_FAILURE_LIMIT)
        age_attempts(16)
    age_attempts(20)
    fail(Client(REMOTE_ADDR="10.0.0.9"), "bob", 1)  # axes drops expired attempts here
    assert attempt(Client(), "alice", ALICE_PASSWORD).status_code == 429


def test_it_forgets_lockouts_older_than_the_back_off_memory(client, alice, settings):
    fail(client, "alice", settings.AXES_FAILURE_LIMIT)
    AccessAttempt.objects.all().delete()
    AuditRecord.objects.filter(action="login_locked_out").update(
        created_at=timezone.now() - timedelta(hours=settings.CAESURA_LOGIN_BACKOFF_HOURS + 1)
    )
    response = fail_once_more_than_allowed(client, settings)
    assert "locked for 15 minutes" in response.content.decode()


def client_address(client: Client) -> str:
    return str(client.defaults.get("REMOTE_ADDR", "127.0.0.1"))


def age_failure_log(minutes: int) -> None:
    """As if the logged failures and logins had happened ``minutes`` earlier."""
    for model in (AccessFailureLog, AccessLog):
        for record in model.objects.all():
            record.attempt_time -= timedelta(minutes=minutes)
            record.save(update_fields=["attempt_time"])


def guess_slowly(client: Client, rounds: int, settings) -> None:
    """Failures just under the account's limit, each round a cool-off after the one before."""
    for _ in range(rounds):
        fail(client, "alice", settings.AXES_FAILURE_LIMIT - 1, REMOTE_ADDR=client_address(client))
        age_attempts(settings.CAESURA_LOGIN_LOCKOUT_MINUTES + 1)
        age_failure_log(settings.CAESURA_LOGIN_LOCKOUT_MINUTES + 1)


def test_it_locks_an_account_guessed_at_slowly_until_its_oldest_failure_is_a_day_old(
    client, alice, bob, settings
):
    settings.CAESURA_LOGIN_DAY_FAILURE_LIMIT = 3 * (settings.AXES_FAILURE_LIMIT - 1)
    guess_slowly(client, 2, settings)  # never a lockout by the account's own limit ...
    assert attempt(Client(), "alice", ALICE_PASSWORD).status_code == 302  # (a login: count anew)
    guess_slowly(client, 2, settings)
    assert not AuditRecord.objects.filter(action="login_locked_out").exists()
    guess_slowly(client, 1, settings)  # ... but the failures since that login reach the day's
    response = attempt(client, "alice", ALICE_PASSWORD, HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 429 and 'id="locked-out"' in response.content.decode()
    oldest_age = 3 * (settings.CAESURA_LOGIN_LOCKOUT_MINUTES + 1)  # three rounds, aged after each
    left = settings.CAESURA_LOGIN_BACKOFF_HOURS * 60 - oldest_age
    assert f"locked for {left} minutes" in response.content.decode()
    record = AuditRecord.objects.get(action="login_locked_out")
    assert record.payload["scope"] == "slow" and record.actor == "alice"
    assert record.payload["failures"] == settings.CAESURA_LOGIN_DAY_FAILURE_LIMIT
    assert attempt(Client(REMOTE_ADDR="10.0.0.2"), "alice", ALICE_PASSWORD).status_code == 429
    fail(client, "alice", 2)  # refused, as the two above: not guesses, so the lock is not longer
    assert attempt(Client(), "bob", "bob-password-1").status_code == 302  # the account alone
    age_failure_log(left + 1)  # the oldest guess is older than the memory: open again
    assert attempt(Client(), "alice", ALICE_PASSWORD).status_code == 302
    assert AuditRecord.objects.filter(action="login_locked_out").count() == 1


def test_it_audits_a_slow_lock_reached_by_the_failure_that_locks_the_account_too(
    client, alice, settings
):
    settings.CAESURA_LOGIN_DAY_FAILURE_LIMIT = settings.AXES_FAILURE_LIMIT
    fail(client, "alice", settings.AXES_FAILURE_LIMIT)
    scopes = AuditRecord.objects.filter(action="login_locked_out").values_list(
        "payload__scope", flat=True
    )
    assert sorted(scopes) == ["account", "slow"]
    age_attempts(settings.CAESURA_LOGIN_LOCKOUT_MINUTES + 1)  # the account's lockout is over ...
    assert attempt(client, "alice", ALICE_PASSWORD).status_code == 429  # ... the slow one not


def test_it_locks_slow_guessing_by_the_pair_alone_where_the_account_limit_does(alice, settings):
    settings.AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
    settings.CAESURA_LOGIN_DAY_FAILURE_LIMIT = 2 * (settings.AXES_FAILURE_LIMIT - 1)
    guess_slowly(Client(REMOTE_ADDR="10.6.6.6"), 2, settings)  # from one address only
    assert attempt(Client(REMOTE_ADDR="10.6.6.6"), "alice", ALICE_PASSWORD).status_code == 429
    assert attempt(Client(REMOTE_ADDR="10.0.0.2"), "alice", ALICE_PASSWORD).status_code == 302


def fail_once_more_than_allowed(client: Client, settings) -> object:
    fail(client, "alice", settings.AXES_FAILURE_LIMIT - 1)
    return attempt(client, "alice", "wrong-password", HTTP_ACCEPT_LANGUAGE="en")


def test_it_prunes_the_failure_log_by_an_index_not_by_reading_all_of_it(client, alice, settings):
    """Every failed login deletes the failures older than the memory: an index on their time,
    so a log grown by guesses at any name is not read whole each time."""
    fail(client, "alice", 2)
    age_failure_log(settings.CAESURA_LOGIN_BACKOFF_HOURS * 60 + 1)
    fail(client, "alice", 1)
    assert AccessFailureLog.objects.count() == 1  # the two old ones pruned, this one kept
    since = timezone.now() - timedelta(hours=settings.CAESURA_LOGIN_BACKOFF_HOURS)
    sql, params = AccessFailureLog.objects.filter(attempt_time__lt=since).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # the plan with few rows, as with many
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "reviewer_axes_failure_time_idx" in plan, plan
