"""Reachability checks for the services Caesura depends on, with advice a person can act on."""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import redis
from django.conf import settings
from django.db import connection

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "detail": self.detail}


# The longest a look at Postgres (/healthz, and /metrics before its Postgres figures) waits
# for a pooled connection: a probe must answer well within a load balancer's or Prometheus's
# timeout, where a request waits the pool's DB_POOL_WAIT_S.
DATABASE_PROBE_S = 2


def check_database(timeout_s: float = DATABASE_PROBE_S) -> Check:
    try:
        probe_database(timeout_s)
        return Check("database", True, "connected")
    except Exception as exc:  # any driver error means "down" to a health check
        return Check("database", False, _first_line(exc))


def database_pool() -> ConnectionPool[Any] | None:
    """This process's psycopg pool; None where the settings ask for none (a worker)."""
    return cast("ConnectionPool[Any] | None", getattr(connection, "pool", None))


def probe_database(timeout_s: float) -> None:
    """SELECT 1 on a connection of this process: from the pool, where it has one (the web
    server), waiting at most ``timeout_s`` for it; else on this thread's own connection."""
    pool = database_pool()
    if pool is None or pool.closed:  # no pool, or Django opens it with its first connection
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return
    conn = pool.getconn(timeout=timeout_s)
    try:
        conn.execute("SELECT 1")
    finally:
        pool.putconn(conn)


def check_redis() -> Check:
    try:
        redis_client().ping()
        return Check("redis", True, "connected")
    except Exception as exc:
        return Check("redis", False, _first_line(exc))


def check_worker() -> Check:
    """Up while a worker of this installation beats. Every worker writes a short-lived key
    under this installation's namespace (its database and queue) every few seconds, from a
    thread, so it counts while it generates (a solo-pool worker cannot answer a broker ping
    then); workers of another installation sharing the Redis write other keys and do not
    count."""
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


# --- this installation's names in a shared Redis -------------------------------------------


def namespace() -> str:
    """What every Redis key and channel-layer group of this installation begins with:
    ``caesura:<database name>:<queue>``. Installations sharing one Redis keep apart when
    either differs: their pause flags, event groups, watched marks, rate counters and worker
    heartbeats never meet. The web and its workers read the same settings
    (DATABASE_URL, CAESURA_QUEUE), so they agree. Read per call (settings may be
    overridden in tests), and cheap: it is called for every token."""
    return f"caesura:{settings.DATABASES['default']['NAME']}:{settings.CELERY_TASK_DEFAULT_QUEUE}"


def group_namespace() -> str:
    """``namespace()`` as a channel-layer group name may spell it (ASCII letters, digits,
    '-', '_' and '.', under 100 characters in all): ``caesura.<database>.<queue>``, or, where
    a part has other characters or the whole would be long, a readable prefix and a hash of
    the namespace (never the same as another installation's)."""
    return _group_namespace(namespace())


_GROUP_PART = re.compile(r"[A-Za-z0-9_-]+")
GROUP_NAMESPACE_MAX = 64  # leaves room for "queue-…-user-<id>" within channels' 100


@functools.lru_cache(maxsize=64)
def _group_namespace(space: str) -> str:
    parts = space.split(":")
    readable = ".".join(parts)
    if (
        len(parts) == 3
        and all(_GROUP_PART.fullmatch(part) for part in parts)
        and len(readable) <= GROUP_NAMESPACE_MAX
    ):
        return readable  # exactly two dots: no hashed name below has two
    digest = hashlib.sha256(space.encode()).hexdigest()[:16]
    return f"{re.sub(r'[^A-Za-z0-9_-]', '_', space)[:40]}.{digest}"


# --- worker liveness: written by reviewer/worker/runtime.py, read here and by services -----------------

ALIVE_TTL_S = 10  # a worker's key outlives two missed beats, no more


def alive_key(hostname: str) -> str:
    return f"{namespace()}:worker-alive:{hostname}"


def loading_key(hostname: str) -> str:
    """Held, as the alive key, while the worker loads its model (a first start compiles it)."""
    return f"{namespace()}:worker-loading:{hostname}"


def _names_under(prefix: str) -> set[str]:
    """The rest of every key that begins with ``prefix`` (its glob characters matched as
    themselves: a queue may be named ``a*``)."""
    match = re.sub(r"([*?\[\]\\])", r"\\\1", prefix) + "*"
    return {key.decode()[len(prefix) :] for key in redis_client().scan_iter(match=match)}


def loading_workers() -> set[str]:
    return _names_under(loading_key(""))


def engine_loading() -> bool:
    """Whether every live worker is still loading its model: a session started now waits for
    that (minutes on a first start, which compiles it). False when that cannot be read."""
    try:
        alive = alive_workers()
        return bool(alive) and alive <= loading_workers()
    except Exception:
        return False


def alive_workers() -> set[str]:
    return _names_under(alive_key(""))


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
