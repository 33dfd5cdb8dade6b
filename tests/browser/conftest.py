"""Real-browser fixtures: the app under daphne on the test database, a real Celery worker
(from tests/conftest.py), and Debian's chromium driven by Playwright's sync API."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.markers import require

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Playwright's sync API runs an event loop in the test thread, and Django refuses ORM calls
# from a thread with a running loop; the tests use the ORM only to set up and check.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

SCREENSHOTS = REPO / "artifacts" / "screenshots"
VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture(scope="package")
def browser():
    """Torn down with this package: Playwright's loop must not outlive the browser tests."""
    from playwright.sync_api import sync_playwright

    require("browser", "launches chromium")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make browser` installs Debian's chromium")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport=VIEWPORT, locale="en-US")
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


def log_in(page, server_url: str, username: str, password: str) -> None:
    page.goto(server_url + "/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#log-in")
    page.wait_for_url(server_url + "/")


def screenshot(page, name: str, full_page: bool = False) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
