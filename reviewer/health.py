"""Reachability checks for the services Caesura depends on, with advice a person can act on."""

from __future__ import annotations

import time
from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import connection


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def to_dict(self) -> dict:
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
    """A worker counts as up if one answered a ping within the last few seconds."""
    fresh_s = settings.CAESURA_WORKER_PING_FRESH_S
    try:
        client = redis_client()
        last = client.get(ping_key())
        stale = last is None or time.time() - float(last) > fresh_s
        if stale and _ping_workers():
            client.set(ping_key(), time.time())
            last = time.time()
        if last is not None and time.time() - float(last) <= fresh_s:
            return Check("worker", True, f"answered {time.time() - float(last):.1f} s ago")
        return Check("worker", False, f"no Celery worker answered a ping within {fresh_s} s")
    except Exception as exc:
        return Check("worker", False, _first_line(exc))


def ping_key() -> str:
    return f"caesura:{settings.DATABASES['default']['NAME']}:worker:last_ping"


def _ping_workers() -> bool:
    from webapp.celery import app

    return bool(app.control.ping(timeout=1.0))


def redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
