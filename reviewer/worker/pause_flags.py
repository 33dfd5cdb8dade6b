"""Pause and cancel requests that cross processes: the web sets a Redis key; the worker's
flag watcher reads it into memory, where the engine polls it."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

import redis
from django.conf import settings

from inference.control import CANCEL, PAUSE, ControlHandle
from inference.message import Message
from reviewer.web.health import namespace, redis_client
from reviewer.worker import flag_watcher

log = logging.getLogger(__name__)

# What a Redis restart, a failover or a network blip raises; anything else is a real error.
OUTAGE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


class RedisUnavailable(Exception):
    """Redis stayed out of reach longer than the grace: the segment gives up, clearly."""


def control_key(session_id: int) -> str:
    # The namespace (database and queue) keeps installations sharing one Redis apart.
    return f"{namespace()}:control:{session_id}"


# A reviewer's pause, cancel or resume waits this long for Redis before it is refused; the
# worker rides out a longer outage (CAESURA_REDIS_GRACE_S), but a person should not wait.
REQUEST_WAIT_S = 5


def request_pause(session_id: int) -> None:
    payload = json.dumps({"command": PAUSE, "requested_at": time.time()})
    # NX: a cancel already waiting must not be overwritten by a pause.
    _write(lambda client: _announce(client, session_id, payload, nx=True))


def request_cancel(session_id: int) -> None:
    payload = json.dumps({"command": CANCEL, "requested_at": time.time()})
    _write(lambda client: _announce(client, session_id, payload))


# Store the request (NX: never over a request waiting) and, when stored, publish it on the
# wake channel: the worker's flag watcher takes it from the message, without a round trip
# back to Redis. One round trip, atomic: a request not stored is never announced.
ANNOUNCE = """
local stored
if ARGV[3] == 'nx' then
    stored = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', 3600)
else
    stored = redis.call('SET', KEYS[1], ARGV[1], 'EX', 3600)
end
if stored then redis.call('PUBLISH', ARGV[2], ARGV[4]) end
return stored and 1 or 0
"""


def _announce(client: redis.Redis, session_id: int, payload: str, nx: bool = False) -> None:
    """Store the request, and wake the workers' flag watchers with it."""
    key = control_key(session_id)
    message = json.dumps({"key": key, "request": payload})
    client.eval(ANNOUNCE, 1, key, payload, flag_watcher.wake_channel(), "nx" if nx else "", message)


def clear(session_id: int) -> None:
    _write(lambda client: client.delete(control_key(session_id)))


def _write(action: Callable[[redis.Redis], object]) -> None:
    """Write a flag through a Redis blip of a few seconds; past that, RedisUnavailable."""
    deadline = time.monotonic() + min(settings.CAESURA_REDIS_GRACE_S, REQUEST_WAIT_S)
    while True:
        try:
            action(redis_client())
            return
        except OUTAGE as exc:
            if time.monotonic() >= deadline:
                raise RedisUnavailable(
                    Message("Redis is out of reach (%(error)s)", error=str(exc))
                ) from None
            time.sleep(0.25)


class RedisControl(ControlHandle):
    """The engine's control handle for one session: the Redis key above, read from memory.

    The process's flag watcher (reviewer/worker/flag_watcher.py) keeps the request current
    from another thread, so ``poll`` never waits on Redis. An outage shorter than
    ``CAESURA_REDIS_GRACE_S`` does not stop the generation: the last answer stands (a pause or
    cancel asked meanwhile is read once Redis answers again); past the grace ``poll`` raises
    ``RedisUnavailable``."""

    def __init__(self, session_id: int, watcher: flag_watcher.FlagWatcher | None = None) -> None:
        super().__init__()
        self.session_id = session_id
        self.key = control_key(session_id)
        self.requested_at: float | None = None
        self._request: str | None = None  # the stored request, as stored
        # When the request's path reached each stage in this process (epoch seconds): the
        # watcher woke, the flag was in memory, the engine honoured it.
        self.stamps: dict[str, float] = {}
        self.grace_s = settings.CAESURA_REDIS_GRACE_S
        self._honoured: float | None = None  # the request the engine cleared last
        self._since = time.monotonic()
        self._outage_told = False
        self.watcher = watcher or flag_watcher.shared()
        self.update(self.read())  # a request made before the segment stops its first step
        self.watcher.register(self)

    def close(self) -> None:
        """The segment ended: the watcher stops reading this session's flag."""
        self.watcher.unregister(self)

    def read(self) -> bytes | str | None:
        """The stored request, read now (never from the serving loop's thread); None while
        Redis is out of reach."""
        try:
            return redis_client().get(self.key)
        except OUTAGE:
            return None

    def waiting(self) -> str | None:
        """The request stored now, read from Redis itself."""
        raw = self.read()
        return json.loads(raw)["command"] if raw is not None else None

    def update(self, raw: bytes | str | None, woke_at: float | None = None) -> None:
        """The watcher's answer for this key (read after a wake message at ``woke_at``); the
        request the engine already honoured (its delete still on its way) is not taken up again."""
        message = json.loads(raw) if raw is not None else None
        with self._lock:
            if message is None:
                self._command = None
            elif message.get("requested_at") != self._honoured:
                if message.get("requested_at") != self.requested_at:  # a new request: stamp it
                    self.stamps = {"read": time.time()}
                    if woke_at is not None and woke_at >= message.get("requested_at", 0):
                        self.stamps["woke"] = woke_at
                self._command = message["command"]
                self.requested_at = message.get("requested_at")
                self._request = raw.decode() if isinstance(raw, bytes) else raw

    def poll(self) -> str | None:
        self._check_reachable()
        with self._lock:
            return self._command

    def clear(self) -> None:
        with self._lock:
            self.stamps["honoured"] = time.time()
            self._honoured = self.requested_at
            self._command, self._reason = None, "manual"
            request = self._request
        if request is not None:
            self.watcher.delete(self.key, request)

    def request_pause(self, reason: str = "manual") -> None:
        request_pause(self.session_id)

    def request_cancel(self) -> None:
        request_cancel(self.session_id)

    def _check_reachable(self) -> None:
        failing_since = self.watcher.failing_since
        silent = (
            0.0 if failing_since is None else time.monotonic() - max(failing_since, self._since)
        )
        if silent > self.grace_s:
            raise RedisUnavailable(
                Message(
                    "Redis was out of reach for more than %(seconds)s s (CAESURA_REDIS_GRACE_S)",
                    seconds=self.grace_s,
                )
            )
        if silent > OUTAGE_NOTICE_S and not self._outage_told:
            log.warning(
                "session %s: Redis out of reach; generating on for up to %d s",
                self.session_id,
                self.grace_s,
            )
        elif silent <= OUTAGE_NOTICE_S and self._outage_told:
            log.info("session %s: Redis answers again", self.session_id)
        self._outage_told = silent > OUTAGE_NOTICE_S


OUTAGE_NOTICE_S = 1.0  # Redis failing this long is an outage worth a line in the log
