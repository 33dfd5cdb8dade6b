"""The two processes `make run` starts: a real ASGI server and a real Celery worker."""

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.conftest import REPO, worker_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def asgi_server(settings):
    port = free_port()
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
        env=worker_env(settings.DATABASES["default"]["NAME"]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/login/", timeout=1)
            break
        except OSError:
            time.sleep(0.3)
    yield url
    process.terminate()
    process.wait(timeout=10)


def test_it_serves_login_static_files_and_health(asgi_server, celery_worker_process):
    login = urllib.request.urlopen(asgi_server + "/login/").read().decode()
    assert 'name="password"' in login
    css = urllib.request.urlopen(asgi_server + "/static/reviewer/caesura.css").read().decode()
    assert "--accent" in css
    health = urllib.request.urlopen(asgi_server + "/healthz").read().decode()
    assert '"status": "ok"' in health
