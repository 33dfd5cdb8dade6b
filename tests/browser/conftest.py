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


# The page draws the live heatmap only while its box is on screen: scroll to it (every frame,
# as the box moves while rows arrive) until it shows every token the page holds, and ``until``
# (a selector) matches.
SHOW_LIVE_HEATMAP = """(until) => {
    // The card, not the plot: the plot's own box scrolls, and would be left scrolled.
    document.getElementById("live-attention-card").scrollIntoView({ block: "start" });
    const box = document.getElementById("live-heatmap");
    const drawn = box.querySelector(".main-svg") !== null;
    const current = Number(box.dataset.tokens) === caesura.state.tokens.length;
    return drawn && current && (!until || document.querySelector(until) !== null);
}"""


def show_live_heatmap(page, until: str = "") -> None:
    """Scroll to the live heatmap, as a reviewer does, until it is drawn and current (and
    ``until`` matches); then back to the top."""
    page.wait_for_function(SHOW_LIVE_HEATMAP, arg=until)
    page.evaluate("() => window.scrollTo(0, 0)")


def screenshot(page, name: str, full_page: bool = False) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
