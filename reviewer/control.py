"""Pause and cancel requests that cross processes: the web sets a Redis key, the engine polls it."""

from __future__ import annotations

import json
import time

from django.conf import settings

from inference.control import CANCEL, PAUSE, ControlHandle
from reviewer.health import redis_client


def control_key(session_id: int) -> str:
    # The database name keeps two installations sharing one Redis (e.g. tests) apart.
    return f"caesura:{settings.DATABASES['default']['NAME']}:control:{session_id}"


def request_pause(session_id: int) -> None:
    payload = json.dumps({"command": PAUSE, "requested_at": time.time()})
    # NX: a cancel already waiting must not be overwritten by a pause.
    redis_client().set(control_key(session_id), payload, nx=True, ex=3600)


def request_cancel(session_id: int) -> None:
    redis_client().set(
        control_key(session_id),
        json.dumps({"command": CANCEL, "requested_at": time.time()}),
        ex=3600,
    )


def clear(session_id: int) -> None:
    redis_client().delete(control_key(session_id))


class RedisControl(ControlHandle):
    """The engine's control handle for one session, backed by the Redis key above."""

    def __init__(self, session_id: int) -> None:
        super().__init__()
        self.session_id = session_id
        self.key = control_key(session_id)
        self.client = redis_client()
        self.requested_at: float | None = None

    def poll(self) -> str | None:
        raw = self.client.get(self.key)
        if raw is None:
            return None
        message = json.loads(raw)
        self.requested_at = message.get("requested_at")
        return message["command"]

    def clear(self) -> None:
        self.client.delete(self.key)

    def request_pause(self, reason: str = "manual") -> None:
        request_pause(self.session_id)

    def request_cancel(self) -> None:
        request_cancel(self.session_id)
