"""Whether a reviewer's page follows a session now: a mark in Redis that a web process's
session feed (reviewer/web/session_feed.py) keeps while it feeds sockets, and that a worker's
relay reads to decide whether a gateway generation's tokens may be written in runs
(reviewer/worker/relay.py).

The mark expires on its own instead of being removed: several web processes may feed one
session, and a process that dies must not leave it marked for ever. A session stays marked
for up to ``TTL_S`` after its last page left; its tokens are then written one by one a little
longer, which costs some speed and never a reviewer's view."""

from __future__ import annotations

import logging

import redis

from reviewer.web.health import namespace, redis_client

log = logging.getLogger(__name__)

TTL_S = 30
REFRESH_S = 10  # a feed renews its mark this often, well within TTL_S


def key(session_id: int) -> str:
    """Under the namespace, as the pause flags are: installations sharing a Redis keep apart."""
    return f"{namespace()}:watched:{session_id}"


def mark(session_id: int) -> None:
    redis_client().set(key(session_id), 1, ex=TTL_S)


def is_watched(session_id: int) -> bool:
    """Whether a page follows the session; True where the mark cannot be read, since a
    reviewer may be reading along."""
    try:
        return bool(redis_client().exists(key(session_id)))
    except redis.RedisError as exc:
        log.info("session %s: whether a page follows it is unknown (%s)", session_id, exc)
        return True
