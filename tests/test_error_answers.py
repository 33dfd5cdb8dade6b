"""Every answer under /api/ is JSON, whatever went wrong; pages elsewhere are the app's own,
translated, and never show a traceback, a setting or the URL list."""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import subprocess
import sys
from urllib.parse import urlsplit

import pytest
from django.test import Client

from reviewer.web import api, views
from tests.conftest import REPO
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db

THREE_MB = 3 * 1024 * 1024
TRACEBACK_MARKS = ("Traceback", 'File "', "settings.py", "URLconf", "DEBUG = True")


@pytest.fixture
def api_client(alice) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    return client


def assert_json_error(response, status: int) -> dict:
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    body = json.loads(response.content)
    assert set(body) == {"error"} and body["error"]
    return body


def assert_no_internals(content: bytes) -> None:
    text = content.decode()
    assert not any(mark in text for mark in TRACEBACK_MARKS), text[:500]


# --- under /api/ ---------------------------------------------------------------------------


def test_it_answers_an_unknown_api_address_with_json_404(api_client):
    assert_json_error(api_client.get("/api/nothing/here"), 404)
    assert_json_error(api_client.get("/api/sessions/not-a-number"), 404)


def test_it_answers_a_wrong_method_with_json_405(api_client):
    response = api_client.delete("/api/sessions")
    assert_json_error(response, 405)
    assert response["Allow"] == "GET, POST"


def test_it_answers_a_3_mb_body_with_json_413_naming_the_limit(api_client, settings):
    body = json.dumps({"domain": "x", "input": "a" * THREE_MB})
    response = api_client.post("/api/sessions", body, content_type="application/json")
    message = assert_json_error(response, 413)["error"]
    assert str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE) in message


@pytest.mark.slow  # starts another Python process
def test_it_takes_the_body_limit_from_the_environment():
    env = {**os.environ, "CAESURA_MAX_BODY_BYTES": "4096"}
    code = "import django; django.setup(); from django.conf import settings; print(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**env, "DJANGO_SETTINGS_MODULE": "webapp.settings"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "4096"


def test_it_answers_an_unexpected_error_with_json_500_without_details_and_logs_it(
    api_client, alice, monkeypatch, caplog
):
    session = make_session(alice)

    def broken(*args, **kwargs):
        raise RuntimeError("password=hunter2 in /srv/secret/path")

    monkeypatch.setattr(api, "session_detail", broken)
    with caplog.at_level(logging.ERROR):
        response = api_client.get(f"/api/sessions/{session.pk}")
    assert assert_json_error(response, 500) == {"error": "Internal server error"}
    assert b"hunter2" not in response.content
    logged = [r for r in caplog.records if r.exc_info and "hunter2" in str(r.exc_info[1])]
    assert logged, "the exception and its traceback belong in the server log"


def test_it_answers_503_with_retry_after_when_no_database_connection_comes_in_time(
    api_client, alice, monkeypatch
):
    from django.db import OperationalError

    from reviewer.lifecycle import application_keys

    def no_connection(*args, **kwargs):  # what the web server's pool raises after its wait
        raise OperationalError("couldn't get a connection after 10.00 sec")

    session = make_session(alice)
    monkeypatch.setattr(api, "session_detail", no_connection)
    answer = api_client.get(f"/api/sessions/{session.pk}")
    assert assert_json_error(answer, 503)["error"].startswith("The database is out of reach")
    assert answer["Retry-After"] == "5"

    monkeypatch.setattr(application_keys, "application_for", no_connection)
    answer = api_client.get("/v1/models", HTTP_AUTHORIZATION="Bearer cae_anything")
    assert answer.status_code == 503 and answer["Retry-After"] == "5"
    assert answer.json()["error"]["message"].startswith("The database is out of reach")
    assert b"10.00 sec" not in answer.content


def test_it_answers_json_500_even_when_debug_is_on(api_client, alice, monkeypatch, settings):
    settings.DEBUG = True
    session = make_session(alice)
    monkeypatch.setattr(api, "session_detail", lambda *a, **k: 1 / 0)
    response = api_client.get(f"/api/sessions/{session.pk}")
    assert_json_error(response, 500)
    assert_no_internals(response.content)


def test_it_answers_a_disallowed_host_with_json_400(api_client):
    response = api_client.get("/api/sessions", HTTP_HOST="evil.example")
    assert "ALLOWED_HOSTS" in assert_json_error(response, 400)["error"]


# --- pages elsewhere -----------------------------------------------------------------------


def test_it_shows_its_own_404_page_without_the_url_list(api_client):
    response = api_client.get("/no/such/page", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 404
    assert b"Page not found" in response.content and b"Caesura" in response.content
    assert_no_internals(response.content)


@pytest.mark.usefixtures("compiled_catalogs")
def test_it_shows_error_pages_in_the_readers_language(api_client):
    response = api_client.get("/no/such/page", HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert "找不到页面" in response.content.decode()


def test_it_shows_its_own_500_page_without_a_traceback(api_client, alice, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("secret detail")

    monkeypatch.setattr(views, "glossary_of", broken)
    session = make_session(alice)
    response = api_client.get(f"/sessions/{session.pk}/", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 500
    assert b"Server error" in response.content
    assert b"secret detail" not in response.content
    assert_no_internals(response.content)


def test_it_answers_a_too_large_form_with_a_readable_413_page(settings):
    response = Client().post(
        "/login/", {"username": "a" * THREE_MB, "password": "x"}, HTTP_ACCEPT_LANGUAGE="en"
    )
    assert response.status_code == 413
    page = response.content.decode()
    assert "Too much data" in page and str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE) in page


def test_it_answers_a_disallowed_host_with_a_readable_400_page():
    response = Client().get("/login/", HTTP_HOST="evil.example", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 400
    assert b"Bad request" in response.content
    assert_no_internals(response.content)


def test_it_shows_a_failed_csrf_check_as_its_own_page(alice):
    client = Client(enforce_csrf_checks=True)
    response = client.post("/login/", {"username": "alice", "password": "x"})
    assert response.status_code == 403
    assert b"security token" in response.content


# --- DEBUG ---------------------------------------------------------------------------------


def settings_in_a_fresh_process(**env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if k != "DEBUG"}
    code = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "print(json.dumps({'DEBUG': s.DEBUG}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**base, "DJANGO_SETTINGS_MODULE": "webapp.settings", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # starts two more Python processes
def test_it_keeps_debug_off_unless_the_environment_turns_it_on():
    assert settings_in_a_fresh_process()["DEBUG"] is False
    assert settings_in_a_fresh_process(DEBUG="1")["DEBUG"] is True


# --- the real server ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_refuses_a_chunked_3_mb_body_with_json_413_under_daphne(server_url, alice):
    """No Content-Length to check first: the body is refused when the view reads it."""
    from reviewer.web.auth import issue_token

    key = issue_token(alice)
    parts = urlsplit(server_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    chunk = b"a" * (256 * 1024)
    body = iter([b'{"domain": "x", "input": "', *([chunk] * 12), b'"}'])
    connection.request(
        "POST",
        "/api/sessions",
        body=body,
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
        encode_chunked=True,
    )
    response = connection.getresponse()
    assert response.status == 413
    assert response.getheader("Content-Type") == "application/json"
    assert "bytes" in json.loads(response.read())["error"]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_serves_static_files_and_error_pages_under_daphne_with_debug_off(server_url):
    parts = urlsplit(server_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.request("GET", "/static/reviewer/caesura.css")
    css = connection.getresponse()
    assert css.status == 200 and b"--accent" in css.read()
    connection.request("GET", "/static/admin/css/base.css")
    admin_css = connection.getresponse()
    assert admin_css.status == 200
    admin_css.read()
    connection.request("GET", "/no/such/page")
    missing = connection.getresponse()
    page = missing.read()
    assert missing.status == 404 and b"Page not found" in page
    assert_no_internals(page)


def raw_answer(server_url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """What daphne answers to ``request`` sent as bytes (status, headers, body)."""
    parts = urlsplit(server_url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        conn.sendall(request)
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    return int(status_line.split(" ")[1]), headers, body


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_answers_a_url_or_headers_over_the_servers_limits_in_the_paths_shape(server_url):
    """Twisted dropped a request line over 16 KB without a word and answered headers over
    16 KB with a bare 400; each now gets its status and a body like the path's other errors."""
    query = "q=" + "x" * 20_000
    status, headers, body = raw_answer(
        server_url, f"GET /v1/models?{query} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    )
    assert status == 414 and headers["Content-Type"] == "application/json"
    error = json.loads(body)["error"]
    assert error["code"] == "uri_too_long" and "16384 bytes" in error["message"]
    assert error["type"] == "invalid_request_error"

    status, headers, body = raw_answer(
        server_url, f"GET /api/sessions?{query} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    )
    assert status == 414 and "request body" in json.loads(body)["error"]

    status, headers, body = raw_answer(
        server_url, f"GET /sessions/?{query} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    )
    assert status == 414 and headers["Content-Type"].startswith("text/plain")
    assert b"Request line too long" in body

    many = "".join(f"X-Filler-{i}: {'y' * 4000}\r\n" for i in range(5))  # 20 KB in all
    status, headers, body = raw_answer(
        server_url, f"GET /api/domains HTTP/1.1\r\nHost: localhost\r\n{many}\r\n".encode()
    )
    assert status == 431 and "Request headers too large" in json.loads(body)["error"]
    long_line = f"X-Filler: {'y' * 20_000}\r\n"
    status, headers, body = raw_answer(
        server_url, f"GET /v1/models HTTP/1.1\r\nHost: localhost\r\n{long_line}\r\n".encode()
    )
    assert status == 431 and json.loads(body)["error"]["code"] == "headers_too_large"

    # Within the limits, the same server answers as ever.
    status, _, body = raw_answer(
        server_url,
        b"GET /v1/models?q=short HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    assert status == 401 and json.loads(body)["error"]["code"] == "missing_api_key"
