"""Pages every browser asks for or may land on: the icon, and the styled 404 in both languages."""

from __future__ import annotations

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def compiled_catalogs(settings):
    call_command("compile_translations", verbosity=0)
    settings.LOCALE_PATHS = list(settings.LOCALE_PATHS)


def test_it_serves_a_favicon_without_a_login(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] == "image/x-icon"
    icon = b"".join(response.streaming_content)
    assert icon[:4] == b"\x00\x00\x01\x00"  # an ICO header
    assert b"PNG" in icon[:64]


def test_every_page_links_the_icon(client):
    page = client.get("/login/").content.decode()
    assert 'rel="icon" href="/favicon.ico"' in page
    assert 'rel="icon" href="/static/reviewer/favicon.svg" type="image/svg+xml"' in page


@pytest.mark.parametrize(
    ("language", "words"),
    [
        ("en", ["Page not found", "Back to your sessions", "Log out"]),
        ("zh-hans", ["找不到页面", "退出登录"]),
    ],
)
def test_it_answers_a_missing_page_with_the_sites_own_page(client, alice, language, words):
    client.force_login(alice)
    client.post("/i18n/setlang/", {"language": language, "next": "/"})
    response = client.get("/no/such/page/")
    page = response.content.decode()
    assert response.status_code == 404
    assert "caesura.css" in page and 'class="topbar"' in page
    for word in words:
        assert word in page
