"""Pause and cancel requests that cross processes: the web sets a Redis key, the engine polls it."""

from __future__ import annotations

import json
import logging
import time

import redis
from django.conf import settings

from inference.control import CANCEL, PAUSE, ControlHandle
from reviewer.web.health import redis_client

log = logging.getLogger(__name__)

# What a Redis restart, a failover or a network blip raises; anything else is a real error.
OUTAGE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


class RedisUnavailable(Exception):
    """Redis stayed out of reach longer than the grace: the segment gives up, clearly."""


def control_key(session_id: int) -> str:
    # The database name keeps two installations sharing one Redis (e.g. tests) apart.
    return f"caesura:{settings.DATABASES['default']['NAME']}:control:{session_id}"


# A reviewer's pause, cancel or resume waits this long for Redis before it is refused; the
# worker rides out a longer outage (CAESURA_REDIS_GRACE_S), but a person should not wait.
REQUEST_WAIT_S = 5


def request_pause(session_id: int) -> None:
    payload = json.dumps({"command": PAUSE, "requested_at": time.time()})
    # NX: a cancel already waiting must not be overwritten by a pause.
    _write(lambda client: client.set(control_key(session_id), payload, nx=True, ex=3600))


def request_cancel(session_id: int) -> None:
    payload = json.dumps({"command": CANCEL, "requested_at": time.time()})
    _write(lambda client: client.set(control_key(session_id), payload, ex=3600))


def clear(session_id: int) -> None:
    _write(lambda client: client.delete(control_key(session_id)))


def _write(action) -> None:
    """Write a flag through a Redis blip of a few seconds; past that, RedisUnavailable."""
    deadline = time.monotonic() + min(settings.CAESURA_REDIS_GRACE_S, REQUEST_WAIT_S)
    while True:
        try:
            action(redis_client())
            return
        except OUTAGE as exc:
            if time.monotonic() >= deadline:
                raise RedisUnavailable(f"Redis is out of reach ({exc})") from None
            time.sleep(0.25)


class RedisControl(ControlHandle):
    """The engine's control handle for one session, backed by the Redis key above.

    A Redis outage shorter than ``CAESURA_REDIS_GRACE_S`` does not stop the generation: a poll
    that cannot reach Redis reads as "no request" (a pause or cancel asked meanwhile is seen
    once Redis answers again); past the grace the poll raises ``RedisUnavailable``."""

    def __init__(self, session_id: int) -> None:
        super().__init__()
        self.session_id = session_id
        self.key = control_key(session_id)
        self.client = redis_client()
        self.requested_at: float | None = None
        self.grace_s = settings.CAESURA_REDIS_GRACE_S
        self.down_since: float | None = None

    def poll(self) -> str | None:
        try:
            raw = self.client.get(self.key)
        except OUTAGE as exc:
            self._unreachable(exc)
            return None
        self._reachable()
        if raw is None:
            return None
        message = json.loads(raw)
        self.requested_at = message.get("requested_at")
        return message["command"]

    def clear(self) -> None:
        try:
            self.client.delete(self.key)
        except OUTAGE as exc:
            self._unreachable(exc)

    def request_pause(self, reason: str = "manual") -> None:
        request_pause(self.session_id)

    def request_cancel(self) -> None:
        request_cancel(self.session_id)

    def _unreachable(self, exc: Exception) -> None:
        now = time.monotonic()
        if self.down_since is None:
            self.down_since = now
            log.warning(
                "session %s: Redis out of reach (%s); generating on for up to %d s",
                self.session_id,
                exc,
                self.grace_s,
            )
        elif now - self.down_since > self.grace_s:
            raise RedisUnavailable(
                f"Redis was out of reach for more than {self.grace_s} s"
                f" (CAESURA_REDIS_GRACE_S): {exc}"
            )

    def _reachable(self) -> None:
        if self.down_since is not None:
            log.info(
                "session %s: Redis answers again after %.1f s",
                self.session_id,
                time.monotonic() - self.down_since,
            )
            self.down_since = None
