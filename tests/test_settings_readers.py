"""Settings read through typed readers that name the variable: empty secrets, log levels,
time zones, service URLs and ports; the data directory as Django and the engine both mean
it; probes and scrapes kept out of the HTTPS redirect."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.conftest import REPO
from webapp.env import env_int, env_log_level, env_secret, env_time_zone, env_url, mask_url

# --- empty secret files ---------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "\n", "  \n\n"])
def test_an_empty_secret_file_is_refused_naming_the_variable(monkeypatch, tmp_path, content):
    secret = tmp_path / "secret"
    secret.write_text(content)
    monkeypatch.delenv("X", raising=False)
    monkeypatch.setenv("X_FILE", str(secret))
    with pytest.raises(ImproperlyConfigured, match="X_FILE") as refused:
        env_secret("X", tmp_path / "fallback")
    assert "empty" in str(refused.value)
    assert not (tmp_path / "fallback").exists()  # no secret generated in its place


def test_a_secret_file_with_a_secret_is_read_without_its_newline(monkeypatch, tmp_path):
    (tmp_path / "secret").write_text("s3cret\n")
    monkeypatch.delenv("X", raising=False)
    monkeypatch.setenv("X_FILE", str(tmp_path / "secret"))
    assert env_secret("X", tmp_path / "fallback") == "s3cret"


# --- typed readers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "level"),
    [("info", "INFO"), ("DEBUG", "DEBUG"), (" Warning ", "WARNING"), ("warn", "WARNING")],
)
def test_a_log_level_is_read_in_any_case(monkeypatch, raw, level):
    monkeypatch.setenv("LEVEL", raw)
    assert env_log_level("LEVEL", "INFO") == level


@pytest.mark.parametrize("raw", ["", "verbose", "10"])
def test_an_unknown_log_level_is_refused_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv("LEVEL", raw)
    with pytest.raises(ImproperlyConfigured, match="LEVEL"):
        env_log_level("LEVEL", "INFO")


def test_a_time_zone_is_read_and_checked(monkeypatch):
    monkeypatch.delenv("ZONE", raising=False)
    assert env_time_zone("ZONE", "UTC") == "UTC"
    monkeypatch.setenv("ZONE", "Europe/Paris")
    assert env_time_zone("ZONE", "UTC") == "Europe/Paris"


@pytest.mark.parametrize("raw", ["", "Mars/Olympus_Mons", "../etc/passwd", "/UTC"])
def test_an_unknown_time_zone_is_refused_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv("ZONE", raw)
    with pytest.raises(ImproperlyConfigured, match="ZONE"):
        env_time_zone("ZONE", "UTC")


def test_a_url_is_read_and_its_scheme_checked(monkeypatch):
    monkeypatch.delenv("SERVICE_URL", raising=False)
    assert env_url("SERVICE_URL", "redis://h:1/0", ("redis",)) == "redis://h:1/0"
    monkeypatch.setenv("SERVICE_URL", " rediss://h:1/0 ")
    assert env_url("SERVICE_URL", "", ("redis", "rediss")) == "rediss://h:1/0"


@pytest.mark.parametrize("raw", ["", "  ", "garbage", "://nothing", "mysql://u:pw9@h/db"])
def test_an_empty_or_foreign_url_is_refused_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv("SERVICE_URL", raw)
    with pytest.raises(ImproperlyConfigured, match="SERVICE_URL") as refused:
        env_url("SERVICE_URL", "postgres://h/db", ("postgres", "postgresql"))
    assert "pw9" not in str(refused.value)  # a refusal never shows the password


def test_an_integer_above_its_maximum_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("PORT", "70000")
    with pytest.raises(ImproperlyConfigured, match="PORT=70000 must be at most 65535"):
        env_int("PORT", 0, minimum=0, maximum=65535)
    monkeypatch.setenv("PORT", "65535")
    assert env_int("PORT", 0, minimum=0, maximum=65535) == 65535


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pw123@127.0.0.1:6379/0", "redis://:**@127.0.0.1:6379/0"),
        ("redis://default:pw123@h:1/0", "redis://default:**@h:1/0"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("postgres://u@h/db", "postgres://u@h/db"),
        ("u:pw123@h", "**@h"),
    ],
)
def test_a_url_is_shown_with_its_password_masked(url, shown):
    assert mask_url(url) == shown


# --- the settings module, as a deployment starts it -----------------------------------------


def manage_check(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow  # starts another Python process
@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("LOG_LEVEL", "verbose"),
        ("TIME_ZONE", ""),
        ("DATABASE_URL", ""),
        ("DATABASE_URL", "garbage"),
        ("DATABASE_URL", "postgres://u:pw123@127.0.0.1:5432"),  # no database named
        ("REDIS_URL", ""),
        ("CELERY_BROKER_URL", " "),
        ("CAESURA_WORKER_METRICS_PORT", "70000"),
        ("SECRET_KEY_FILE", "EMPTY"),
        ("CAESURA_VAULT_KEY_FILE", "EMPTY"),
    ],
)
def test_a_bad_setting_stops_the_start_naming_the_variable(tmp_path, var, value):
    if value == "EMPTY":
        (tmp_path / "empty").write_text("\n")
        value = str(tmp_path / "empty")
    env = {var: value}
    if var == "SECRET_KEY_FILE":
        env["SECRET_KEY"] = ""  # the variable itself unset, so the file is read
    result = manage_check(**env)
    assert result.returncode != 0, result.stdout
    assert "ImproperlyConfigured" in result.stderr and var in result.stderr, result.stderr
    assert "pw123" not in result.stderr


@pytest.mark.slow  # starts another Python process
def test_a_lower_case_log_level_starts(tmp_path):
    result = manage_check(LOG_LEVEL="info")
    assert result.returncode == 0, result.stderr


# --- the data directory ---------------------------------------------------------------------


def test_the_engine_expands_the_data_directory_as_django_does(monkeypatch):
    from inference.env import data_dir
    from webapp.env import env_path

    monkeypatch.setenv("CAESURA_DATA_DIR", "~/caesura-fix2-data")
    expected = Path.home() / "caesura-fix2-data"
    assert data_dir() == env_path("CAESURA_DATA_DIR", Path("/unused")) == expected.resolve()
    assert data_dir().is_absolute() and "~" not in str(data_dir())


def test_a_relative_data_directory_is_made_absolute_for_both(monkeypatch, tmp_path):
    from inference.env import data_dir
    from webapp.env import env_path

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAESURA_DATA_DIR", "data")
    assert data_dir() == env_path("CAESURA_DATA_DIR", Path("/unused")) == tmp_path / "data"


# --- HTTPS redirect -------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/healthz", "/metrics"])
def test_probes_and_scrapes_are_not_redirected_to_https(client, settings, path):
    from webapp import settings as configured

    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_REDIRECT_EXEMPT = configured.SECURE_REDIRECT_EXEMPT
    response = client.get(path)
    assert response.status_code not in (301, 302), response.get("Location")


@pytest.mark.django_db
def test_pages_are_still_redirected_to_https(client, settings):
    from webapp import settings as configured

    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_REDIRECT_EXEMPT = configured.SECURE_REDIRECT_EXEMPT
    response = client.get("/login/")
    assert response.status_code == 301 and response["Location"].startswith("https://")


# --- the database's connect timeout ---------------------------------------------------------


def test_a_connection_to_an_address_that_does_not_answer_gives_up_in_time():
    from webapp.settings import database

    assert database("postgres://u@db:5432/c", 0, 5)["OPTIONS"]["connect_timeout"] == 5
    pooled = database("postgres://u@db:5432/c", 20, 3)["OPTIONS"]
    assert pooled["connect_timeout"] == 3 and pooled["pool"]["max_size"] == 20
    # The URL's own setting is kept.
    own = database("postgres://u@db:5432/c?connect_timeout=9", 0, 5)["OPTIONS"]
    assert own["connect_timeout"] in ("9", 9)
