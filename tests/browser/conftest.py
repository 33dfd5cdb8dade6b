"""Real-browser fixtures: the app under daphne on the test database, a real Celery worker
(from tests/conftest.py), and Debian's chromium driven by Playwright's sync API."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO, worker_env

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


def server_env(db_name: str) -> dict[str, str]:
    """The server keeps Django's guard against sync ORM calls on its event loop."""
    env = worker_env(db_name)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_serving(url: str, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"daphne exited with {process.returncode}; see var/test-daphne.log")
        try:
            urllib.request.urlopen(url + "/login/", timeout=1)
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"daphne did not answer at {url} within {timeout} s")


@pytest.fixture(scope="session")
def server_url(django_db_setup, django_db_blocker) -> str:
    """The whole app (HTTP and websockets) under a real ASGI server, on the test database."""
    from django.conf import settings

    port = free_port()
    log = open(REPO / "var" / "test-daphne.log", "w")  # noqa: SIM115 - closed at teardown
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "webapp.asgi:application",
        ],
        cwd=REPO,
        env=server_env(settings.DATABASES["default"]["NAME"]),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

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
