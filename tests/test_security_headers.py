"""Secure by default: a Content-Security-Policy and the usual headers on every page, no inline
script or handler in the templates, `check --deploy` clean under docker-compose's settings, and
an optional bearer token in front of /metrics."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.test import Client

from tests.conftest import REPO

pytestmark = pytest.mark.django_db

TEMPLATES = REPO / "frontend" / "templates"


def directives(header: str) -> dict[str, list[str]]:
    parts = (part.strip().split() for part in header.split(";") if part.strip())
    return {words[0]: words[1:] for words in parts}


@pytest.mark.parametrize("path", ["/login/", "/", "/dashboard/", "/admin/", "/no/such/page"])
def test_it_sends_a_strict_policy_and_the_usual_headers_on_every_page(admin_user, path):
    client = Client()
    client.force_login(admin_user)
    response = client.get(path)
    policy = directives(response["Content-Security-Policy"])
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"][0] == "'self'"
    assert all(s.startswith("'nonce-") for s in policy["script-src"][1:])
    assert "'unsafe-inline'" not in response["Content-Security-Policy"]
    assert "'unsafe-eval'" not in response["Content-Security-Policy"]
    assert set(policy["connect-src"]) == {"'self'", "ws://testserver", "wss://testserver"}
    assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"


def test_it_sends_the_policy_with_api_answers_too(alice):
    client = Client()
    client.force_login(alice)
    response = client.get("/api/sessions")
    assert "default-src 'self'" in response["Content-Security-Policy"]


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*\bnonce=)[^>]*>", re.I)
INLINE_HANDLER = re.compile(r"""<[^>]*\son[a-z]+\s*=\s*["']""", re.I)
INLINE_STYLE = re.compile(r"""<style\b(?![^>]*\bnonce=)|<[^>]*\sstyle\s*=\s*["']""", re.I)


def template_files() -> list[Path]:
    return sorted(TEMPLATES.rglob("*.html"))


def test_it_has_no_inline_script_handler_or_style_in_its_templates():
    offenders = []
    for path in template_files():
        text = path.read_text()
        for pattern in (INLINE_SCRIPT, INLINE_HANDLER, INLINE_STYLE):
            offenders += [f"{path.relative_to(REPO)}: {m.group(0)}" for m in pattern.finditer(text)]
    assert not offenders, offenders


def test_it_still_matches_what_the_pinned_plotly_does_with_styles():
    """The policy and frontend/templates/reviewer/plotly.html are fitted to this Plotly: its
    style elements found by id, and the style attributes allowed by hash."""
    from django.conf import settings

    from reviewer.web.views import plotly_path

    plotly = plotly_path().read_text()
    placeholders = re.findall(
        r'<style id="([^"]+)"', (TEMPLATES / "reviewer/plotly.html").read_text()
    )
    assert placeholders == ["plotly.js-style-global", MAPLIBRE_STYLE_ID]
    assert '"plotly.js-style-"+' in plotly and 'matches(".no-inline-styles")' in plotly
    assert f'document.getElementById("{MAPLIBRE_STYLE_ID}")' in plotly
    declarations = re.search(r"CSS_DECLARATIONS=(\[\[.*?\]\])", plotly).group(1)
    pixelated = "".join(f"{name}: {value}; " for name, value in json.loads(declarations))
    assert pixelated in settings.PLOTLY_STYLE_ATTRIBUTES
    assert 'attr("style","")' in plotly and "" in settings.PLOTLY_STYLE_ATTRIBUTES


MAPLIBRE_STYLE_ID = "9f215cf04c5486422605d13261cb87401f4e7763b6296af81e98efbc0130da53"


# --- check --deploy --------------------------------------------------------------------------


def compose_web_env(tmp_path: Path) -> dict[str, str]:
    """The web service's environment from docker-compose.yml, with /data made local."""
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    env = {k: str(v) for k, v in compose["services"]["web"]["environment"].items()}
    env = {k: re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", v) for k, v in env.items()}  # ${X:-default}
    data = tmp_path / "data"
    data.mkdir()
    (data / "secret_key").write_text(os.urandom(48).hex())
    return {k: v.replace("/data", str(data)) for k, v in env.items()}


def run_check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess:
    keep = {"PATH", "HOME", "LANG", "PYTHONPATH", "CAESURA_QUEUE"}
    base = {k: v for k, v in os.environ.items() if k in keep}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow  # starts another Python process
def test_it_passes_check_deploy_under_the_compose_settings(tmp_path):
    result = run_check_deploy(compose_web_env(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.slow  # starts another Python process
def test_it_fails_check_deploy_with_debug_on(tmp_path):
    result = run_check_deploy({**compose_web_env(tmp_path), "DEBUG": "1"})
    assert result.returncode != 0 and "security.W018" in result.stdout + result.stderr


@pytest.mark.slow  # starts another Python process
def test_it_turns_on_secure_cookies_and_hsts_behind_an_https_proxy(tmp_path):
    code = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS,"
        " s.SECURE_PROXY_SSL_HEADER, s.DEBUG]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={
            **os.environ,
            **compose_web_env(tmp_path),
            "DJANGO_SETTINGS_MODULE": "webapp.settings",
        },
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == (
        '[true, true, 31536000, ["HTTP_X_FORWARDED_PROTO", "https"], false]'
    )


# --- /metrics ----------------------------------------------------------------------------------


def test_it_serves_metrics_without_credentials_by_default(client):
    assert client.get("/metrics").status_code == 200


def test_it_asks_for_the_bearer_token_when_one_is_set(client, settings):
    settings.CAESURA_METRICS_TOKEN = "scrape-me-0123456789"
    refused = client.get("/metrics")
    assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Bearer")
    assert b"caesura_" not in refused.content
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401
    other_scheme = client.get("/metrics", HTTP_AUTHORIZATION="Token scrape-me-0123456789")
    assert other_scheme.status_code == 401
    allowed = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me-0123456789")
    assert allowed.status_code == 200 and b"caesura_tokens_generated_total" in allowed.content
