"""The real stack bench/gateway.py measures, thrown away afterwards: a new database
(created, migrated, dropped with everything in it), a daphne server and a Celery worker
process (solo pool, on a Celery queue of its own, so no other worker takes its tasks), a
domain in ``delayed`` mode without pause policies, one application per client, two
reviewers of the domain, and a reviewer's queue socket. Logs: var/bench-daphne.log and
var/bench-worker.log. Nothing here touches the database the environment names."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
# A first start compiles the decode step (or loads vLLM) on a busy machine: minutes.
START_WAIT_S = 600
LOG_PREFIX = "bench"  # var/<prefix>-daphne.log, var/<prefix>-worker.log: each benchmark its own


@dataclass
class Stack:
    url: str
    domain: Any
    apps: list[tuple[Any, str]]  # (application, key) per client
    reviewers: list[Any]  # the one who pauses, the one who listens
    processes: list[subprocess.Popen] = field(default_factory=list)


Floor = Callable[[], tuple[Any, list[tuple[Any, str]], list[Any]]]  # domain, apps, reviewers


@contextlib.contextmanager
def running(clients: int = 0, delay: int = 0, prepare: Floor | None = None) -> Iterator[Stack]:
    """The stack, ready; torn down (the database dropped) however the block ends. ``prepare``
    makes what the benchmark needs in the new database (by default the gateway's floor)."""
    # A TERM (a timeout, a test runner) unwinds like an error: the teardown below still runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tag = uuid.uuid4().hex[:8]
    db_name, admin_url = use_own_database(tag)
    admin_sql(admin_url, f'CREATE DATABASE "{db_name}"')
    processes: list[subprocess.Popen] = []
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        port, worker = free_port(), f"bench-{tag}@localhost"
        url = f"http://127.0.0.1:{port}"
        processes = start_processes(port, worker)
        domain, apps, reviewers = prepare() if prepare else floor(clients, delay)
        wait_ready(url, worker, processes)
        yield Stack(url, domain, apps, reviewers, processes)
    finally:
        stop(processes)
        from django.db import connections

        connections.close_all()
        admin_sql(admin_url, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


def use_own_database(tag: str) -> tuple[str, str]:
    """Point this process (and those it starts) at a new database and Celery queue; the new
    database's name and the server's maintenance database to create and drop it from."""
    url = urlsplit(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/caesura"))
    db_name = f"{url.path.lstrip('/') or 'caesura'}_bench_{tag}"
    os.environ["DATABASE_URL"] = urlunsplit(url._replace(path=f"/{db_name}"))
    os.environ["CAESURA_QUEUE"] = f"caesura-bench-{tag}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    return db_name, urlunsplit(url._replace(path="/postgres"))


def admin_sql(admin_url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(command: list[str], name: str, env: dict[str, str]) -> subprocess.Popen:
    out = open(ROOT / "var" / f"{LOG_PREFIX}-{name}.log", "w")  # noqa: SIM115 - the process owns it
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def start_processes(port: int, worker: str) -> list[subprocess.Popen]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # The server keeps Django's guard against sync ORM calls on its event loop.
    server_env = {k: v for k, v in env.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    server_env.setdefault("CAESURA_DB_POOL_SIZE", "20")  # as make run starts it
    daphne = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    celery = [sys.executable, "-m", "celery", "-A", "webapp", "worker", "--pool=solo"]
    return [
        start([*daphne, "webapp.asgi:application"], "daphne", server_env),
        start([*celery, "--loglevel=WARNING", f"--hostname={worker}"], "worker", env),
    ]


def wait_ready(url: str, worker: str, processes: list[subprocess.Popen]) -> None:
    from webapp.celery import app

    deadline, served, pinged = time.monotonic() + START_WAIT_S, False, False
    while not (served and pinged):
        if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
            raise RuntimeError(f"daphne or the worker did not start; see var/{LOG_PREFIX}-*.log")
        try:
            served = served or bool(urllib.request.urlopen(url + "/login/", timeout=1))
        except OSError:
            time.sleep(0.3)
        pinged = pinged or bool(app.control.ping(destination=[worker], timeout=0.5))


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def floor(clients: int, delay: int) -> tuple[Any, list[tuple[Any, str]], list[Any]]:
    """The delayed domain, an application per client (limits out of the way), two reviewers."""
    from django.contrib.auth.models import User

    from reviewer.lifecycle import application_keys
    from reviewer.models import Domain
    from reviewer.models.domain import DELAYED

    domain = Domain.objects.create(
        name="Bench",
        slug="bench",
        specialty="general",
        delivery_mode=DELAYED,
        delay_sentences=delay,
        auto_approve_unpaused=True,
        max_wait_s=3600,
    )
    limits = {"max_concurrent": 64, "requests_per_minute": 100_000}
    apps = [
        application_keys.create(f"bench-{i}", [domain], "bench", **limits) for i in range(clients)
    ]
    reviewers = [User.objects.create_user(n, password=uuid.uuid4().hex) for n in ("pia", "quinn")]
    domain.reviewers.add(*reviewers)
    return domain, apps, reviewers


class QueueSocket(threading.Thread):
    """A reviewer's open queue page (``/ws/queue/``): every message, with when it arrived."""

    def __init__(self, url: str, user: Any) -> None:
        super().__init__(daemon=True)
        from websockets.sync.client import connect

        headers = {"Cookie": session_cookie(user), "Origin": url}
        self.socket = connect(
            url.replace("http", "ws", 1) + "/ws/queue/", additional_headers=headers
        )
        self.messages: list[tuple[float, dict[str, Any]]] = []

    def run(self) -> None:
        with contextlib.suppress(Exception):  # closed at the end
            for raw in self.socket:
                self.messages.append((time.time(), json.loads(raw)))

    def arrival(self, session: int, status: str, after: int, timeout: float = 60) -> float:
        """When a message saying ``session`` is now ``status`` arrived (after the first
        ``after`` messages)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, message in self.messages[after:]:
                if message.get("session") == session and message.get("status") == status:
                    return at
            time.sleep(0.002)
        raise RuntimeError(f"the queue socket never heard that session {session} was {status}")


def in_threads(fn, n: int) -> list:
    barrier, results = threading.Barrier(n), [None] * n

    def one(i: int) -> None:
        results[i] = fn(i, barrier)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if any(r is None for r in results):
        raise RuntimeError("a client failed; see the traceback above")
    return results


def wait_until(predicate, what: str, timeout: float = 120, every: float = 0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(every)
    raise RuntimeError(f"timed out waiting for {what}")


def session_cookie(user: Any) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"
