"""Reachability checks for the services Caesura depends on, with advice a person can act on."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings
from django.db import connection


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "detail": self.detail}


def check_database() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return Check("database", True, "connected")
    except Exception as exc:  # any driver error means "down" to a health check
        return Check("database", False, _first_line(exc))


def check_redis() -> Check:
    try:
        redis_client().ping()
        return Check("redis", True, "connected")
    except Exception as exc:
        return Check("redis", False, _first_line(exc))


def check_worker() -> Check:
    """Up while a worker of this installation beats. Every worker writes a short-lived key
    naming this database every few seconds, from a thread, so it counts while it generates
    (a solo-pool worker cannot answer a broker ping then); workers of another installation
    sharing the Redis write other keys and do not count."""
    try:
        names = sorted(alive_workers())
        loading = loading_workers() & set(names)
    except Exception as exc:
        return Check("worker", False, _first_line(exc))
    if names:
        shown = [f"{name} (loading the model)" if name in loading else name for name in names]
        return Check("worker", True, f"{len(names)} alive: {', '.join(shown)}")
    return Check(
        "worker", False, f"no worker of this installation beat in the last {ALIVE_TTL_S} s"
    )


# --- worker liveness: written by reviewer/worker/runtime.py, read here and by services -----------------

ALIVE_TTL_S = 10  # a worker's key outlives two missed beats, no more


def alive_key(hostname: str) -> str:
    return f"caesura:{settings.DATABASES['default']['NAME']}:worker-alive:{hostname}"


def loading_key(hostname: str) -> str:
    """Held, as the alive key, while the worker loads its model (a first start compiles it)."""
    return f"caesura:{settings.DATABASES['default']['NAME']}:worker-loading:{hostname}"


def loading_workers() -> set[str]:
    prefix = loading_key("")
    return {key.decode()[len(prefix) :] for key in redis_client().scan_iter(match=prefix + "*")}


def engine_loading() -> bool:
    """Whether every live worker is still loading its model: a session started now waits for
    that (minutes on a first start, which compiles it). False when that cannot be read."""
    try:
        alive = alive_workers()
        return bool(alive) and alive <= loading_workers()
    except Exception:
        return False


def alive_workers() -> set[str]:
    prefix = alive_key("")
    return {key.decode()[len(prefix) :] for key in redis_client().scan_iter(match=prefix + "*")}


def redis_client() -> redis.Redis:
    """A client for ``REDIS_URL``, shared by the process's threads."""
    return _client(settings.REDIS_URL)


@functools.cache
def _client(url: str) -> redis.Redis:
    # One pool per URL: a client made per call opened a connection per call (a gateway
    # request's rate count, the heartbeat's beat), each a TCP handshake and a HELLO on cores
    # the model keeps busy. The pool takes a new connection after a failure or a fork.
    return redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
