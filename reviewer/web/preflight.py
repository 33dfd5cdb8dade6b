"""Before start-up: are Postgres and Redis reachable, and does the database exist?

Runs before Django touches the database, so a missing service is reported in one
readable paragraph instead of a traceback.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import psycopg
import redis
from django.conf import settings
from psycopg import sql

from webapp.env import mask_url

FIX_HINT = (
    "Start it (on Debian: `pg_ctlcluster 15 main start` / `redis-server --daemonize yes`), "
    "or run `docker compose up -d postgres redis`, or point {var} at a running server."
)


class ServiceUnavailable(RuntimeError):
    pass


def database_settings() -> dict[str, Any]:
    db = settings.DATABASES["default"]
    return {
        "host": db.get("HOST") or "127.0.0.1",
        "port": int(db.get("PORT") or 5432),
        "user": db.get("USER") or "postgres",
        "password": db.get("PASSWORD") or None,
        "dbname": db["NAME"],
    }


def ensure_database() -> str:
    """Create the configured database if the server has none of that name. Returns what happened."""
    params = database_settings()
    name = params.pop("dbname")
    address = f"{params['host']}:{params['port']}"
    try:
        with psycopg.connect(
            dbname="postgres", connect_timeout=3, autocommit=True, **params
        ) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
            if exists:
                return f"PostgreSQL at {address}: database {name!r} present"
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            return f"PostgreSQL at {address}: created database {name!r}"
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "no answer"
        raise ServiceUnavailable(
            f"PostgreSQL is not reachable at {address} ({reason}). "
            + FIX_HINT.format(var="DATABASE_URL")
        ) from None


def check_redis() -> str:
    """Whether Redis answers; the URL shown with its password masked (this goes to terminals
    and CI logs)."""
    shown = mask_url(settings.REDIS_URL)
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=3).ping()
        return f"Redis at {shown}: reachable"
    except redis.RedisError as exc:
        reason = str(exc).replace(settings.REDIS_URL, shown)
        password = urlsplit(settings.REDIS_URL).password
        if password:
            reason = reason.replace(password, "**")
        raise ServiceUnavailable(
            f"Redis is not reachable at {shown} ({reason}). " + FIX_HINT.format(var="REDIS_URL")
        ) from None
