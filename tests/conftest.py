"""Shared fixtures: named personas, a demo domain, a real Celery worker process and the real
model in this process, each started once per run."""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytest_plugins = ["tests.markers"]
# Engines the tests load (and the worker and server processes they start) decode eagerly
# unless a test asks for the compiled step, which has its own tests: a first compile takes
# minutes on a small machine. CAESURA_COMPILE=1 runs the whole suite compiled.
os.environ.setdefault("CAESURA_COMPILE", "0")


def pytest_configure(config: pytest.Config) -> None:
    from django.db.backends.signals import connection_created

    connection_created.connect(commit_without_waiting_for_the_disk, weak=False)
    retry_flush_on_deadlock()


def commit_without_waiting_for_the_disk(sender, connection, **kwargs) -> None:
    """The test database need not survive a crash: its commits, and the table truncations
    after each transactional test, return before the disk has them (other connections see
    them at once all the same). Worker and server processes keep Postgres's default."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO off")


FLUSH_TRIES = 5


def retry_flush_on_deadlock() -> None:
    """A transactional test's tables are truncated after it while the run's worker process
    may still be reading them: its heartbeat looks for orphaned sessions every second with a
    join. TRUNCATE locks the tables one after another, so the two can deadlock, and Postgres
    then cancels one of them; when it cancels the truncation, it is run again."""
    from django.core.management.base import CommandError
    from django.test import TransactionTestCase

    teardown = TransactionTestCase._fixture_teardown

    def _fixture_teardown(self) -> None:
        for attempt in range(FLUSH_TRIES):
            try:
                return teardown(self)
            except CommandError as exc:
                if attempt == FLUSH_TRIES - 1 or not is_deadlock(exc.__cause__):
                    raise
                time.sleep(0.1)

    TransactionTestCase._fixture_teardown = _fixture_teardown  # type: ignore[method-assign]


def is_deadlock(error: BaseException | None) -> bool:
    cause = getattr(error, "__cause__", None)
    return getattr(cause, "sqlstate", None) == "40P01"  # deadlock_detected


def worker_env(db_name: str) -> dict[str, str]:
    """Environment for a subprocess that must share the test database with the test process."""
    from django.conf import settings

    env = dict(os.environ)
    db = settings.DATABASES["default"]
    host, port, user = (
        db.get("HOST") or "127.0.0.1",
        db.get("PORT") or 5432,
        db.get("USER") or "postgres",
    )
    env["DATABASE_URL"] = f"postgres://{user}@{host}:{port}/{db_name}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start_worker(
    tag: str, name: str | None = None, env: dict[str, str] | None = None, wait: bool = True
) -> tuple[subprocess.Popen, str]:
    """Start a real `celery worker` process on the test database; returns it and its name.
    ``name`` restarts a worker under a name used before; ``env`` adds to its environment;
    ``wait=False`` returns at once (a busy solo worker answers no ping)."""
    from django.conf import settings

    from tests.markers import require  # imported as the plugin first, so not at the top

    require("slow", "starts a real Celery worker process")
    name = name or f"{tag}-{uuid.uuid4().hex[:8]}@{socket.gethostname()}"
    log = open(REPO / "var" / f"{tag}-worker.log", "w")  # noqa: SIM115 - the process owns it
    command = [sys.executable, "-m", "celery", "-A", "webapp", "worker", "--pool=solo"]
    process = subprocess.Popen(
        [*command, "--loglevel=INFO", f"--hostname={name}"],
        cwd=REPO,
        env={**worker_env(settings.DATABASES["default"]["NAME"]), **(env or {})},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    if not wait:
        return process, name
    try:
        wait_for_worker(process, name)
    except RuntimeError:
        stop_process(process)  # a worker that never answered must not outlive the test
        raise
    return process, name


def stop_process(process: subprocess.Popen | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="session", autouse=True)
def relay_connections_closed(django_db_setup):
    """Relays' threads outlive their segments with their connections open: closed before the
    test database is dropped, which refuses while any is connected."""
    yield
    from reviewer.worker.relay_threads import threads

    threads.release_idle()


@pytest.fixture(scope="session", autouse=True)
def no_stale_control_flags(django_db_setup):
    """Session ids start again at 1 in each new test database: a pause or cancel flag that an
    earlier run left in Redis under the same id must not stop this run's session."""
    from reviewer.worker import pause_flags

    client = pause_flags.redis_client()
    for key in client.scan_iter(match=pause_flags.control_key("*")):
        client.delete(key)


@pytest.fixture(autouse=True)
def sessions_stopped_before_flush(request):
    """A transactional test's tables are emptied after it. A worker serves many sessions at
    once, so sessions a test left generating are cancelled first: the worker must not be
    writing them while the tables are truncated (Postgres would see a deadlock)."""
    marker = request.node.get_closest_marker("django_db")
    if marker is None or not marker.kwargs.get("transaction"):
        yield
        return
    request.getfixturevalue("_django_db_helper")  # set up first, so torn down after this
    yield
    from reviewer.models import ReviewSession
    from reviewer.worker import pause_flags

    running = ReviewSession.objects.filter(status=ReviewSession.RUNNING)
    live = list(running.values_list("pk", flat=True))
    if not live:
        return
    for pk in live:
        pause_flags.request_cancel(pk)
    # Until they ended, or wrote nothing for a moment (no worker had them).
    written = ReviewSession.objects.filter(pk__in=live).values_list("status", "last_seq")
    deadline, before = time.monotonic() + 10, None
    while time.monotonic() < deadline and running.exists():
        now = sorted(written)
        if now == before:
            break
        before = now
        time.sleep(0.3)
    for pk in live:  # ids may come again in the next test's sessions
        pause_flags.clear(pk)


FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def fast_password_hashing(request):
    """Django's default hasher spends over half a second of CPU on each password, and most
    tests create a user or log in: they hash with MD5, as Django's testing docs advise. A
    ``slow`` or ``browser`` test keeps the real hasher, since a server or worker process it
    starts checks passwords with its own settings."""
    if request.node.get_closest_marker("slow") or request.node.get_closest_marker("browser"):
        yield
        return
    settings = request.getfixturevalue("settings")
    settings.PASSWORD_HASHERS = FAST_HASHERS
    yield


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker):
    """A real worker process on the test database, stopped after the session."""
    process, _ = start_worker("test")
    yield process
    stop_process(process)


@functools.cache
def load_real_engine(compiled: bool = False):
    """The prepared default model on the transformers backend, loaded once per run: the
    engine tests, and the worker tests' uninterrupted reference runs, share it. Eager unless
    ``compiled``: the compiled decode step (tests/inference/test_compiled_real.py)."""
    from inference.loader import default_model_dir, load_engine
    from inference.transformers_backend.settings import StepSettings

    path = default_model_dir()
    if not (path / "config.json").is_file():
        pytest.fail(
            f"the default model is missing at {path}: prepare it (inference/preparation.py) "
            "or set CAESURA_MODEL to a local model directory"
        )
    return load_engine(path, settings=StepSettings(compile=compiled))


@pytest.fixture(scope="session")
def real_engine():
    return load_real_engine()


@pytest.fixture(scope="session")
def compiled_real_engine():
    return load_real_engine(compiled=True)


# A worker answers once its engine is loaded; a first start compiles it (vLLM took 125 s once
# on a 2-core machine busy with another test's compile). The wait ends at the answer.
WORKER_START_S = 300


def wait_for_worker(process: subprocess.Popen, name: str, timeout: float = WORKER_START_S) -> None:
    from webapp.celery import app

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"the Celery worker exited with {process.returncode}; see var/*-worker.log"
            )
        if app.control.ping(destination=[name], timeout=0.5):
            return
    raise RuntimeError(
        f"the Celery worker did not answer a ping within {timeout} s; see var/*-worker.log"
    )


@pytest.fixture
def alice(django_user_model):
    """Alice is a reviewer."""
    return django_user_model.objects.create_user("alice", password="alice-password-1")


@pytest.fixture
def bob(django_user_model):
    """Bob is another reviewer; he must never see Alice's sessions."""
    return django_user_model.objects.create_user("bob", password="bob-password-1")


@pytest.fixture
def paused_with_pending_edit(alice, monkeypatch):
    """Alice's paused session with an edit waiting for the worker (no worker runs)."""
    from reviewer import lifecycle
    from tests.session_factory import make_session, stub_worker

    stub_worker(monkeypatch)
    session = make_session(alice)
    lifecycle.edit(alice, session.pk, 4, 11, "The woman")
    return session


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("root", password="root-password-1")


@pytest.fixture
def compiled_catalogs(settings):
    """The translation catalogs compiled (the .mo files are build output, absent from a fresh
    checkout), and Django made to read them again."""
    from django.core.management import call_command

    call_command("compile_translations", verbosity=0)
    settings.LOCALE_PATHS = list(settings.LOCALE_PATHS)  # a changed setting resets the cache


@pytest.fixture
def plain_domain():
    """A domain without policies: only the reviewer pauses."""
    from reviewer.models import Domain, Glossary, GlossaryTerm

    domain = Domain.objects.create(
        name="Plain",
        slug="plain",
        specialty="medical",
        system_prompt="You are a clinical documentation assistant.",
    )
    glossary = Glossary.objects.create(domain=domain, name="Terms")
    GlossaryTerm.objects.create(
        glossary=glossary,
        term="high blood pressure",
        preferred="essential (primary) hypertension",
        code="I10",
    )
    return domain


def server_env(db_name: str) -> dict[str, str]:
    """The server keeps Django's guard against sync ORM calls on its event loop."""
    env = worker_env(db_name)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    # Pooled as make run starts it, with fewer connections: a call that holds one while it
    # waits shows as the next request's wait (tests/test_gateway_live.py).
    return {**env, "CAESURA_DB_POOL_SIZE": "4"}


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


def wait_for(predicate, timeout: float = 60, what: str = "condition", every: float = 0.1):
    """Poll until predicate() is truthy; its value, or an AssertionError naming what was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
