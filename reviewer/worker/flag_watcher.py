"""Keeps the pause and cancel flags of this worker's running sessions in memory.

The serving loop reads a session's flag once per step; it must never wait on Redis (a stall
would stop every session of the worker at once). One thread per process reads every
registered flag in one round trip and hands the answers to the sessions' control handles;
the loop reads those from memory. A request published on the wake channel carries itself:
it reaches its control as the message arrives (so a pause lands at the next step, with no
round trip back to Redis on a busy machine), and a round follows; rounds also run at least
every INTERVAL_S in case a message was missed. A stall or an outage holds up this thread only: a
flag set meanwhile is read once Redis answers again.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, cast

from django.conf import settings

from reviewer.web.health import namespace, redis_client

if TYPE_CHECKING:
    import redis
    from redis.client import PubSub

    from reviewer.worker.pause_flags import RedisControl

log = logging.getLogger(__name__)

INTERVAL_S = 0.25  # the longest a request waits to be read when its wake message is lost
# (a wake carries its request, so rounds are the fallback: every 20 ms they cost a decoding
# worker about 1 ms of CPU per token, which its two busy cores pay as step time)


def wake_channel() -> str:
    """Where a request is announced; the namespace keeps installations apart."""
    return f"{namespace()}:control-wake"


class FlagWatcher:
    def __init__(self) -> None:
        self._controls: dict[str, RedisControl] = {}  # by key
        # (key, request) the engine honoured: deleted unless a newer request replaced it
        self._deletes: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        # Since when Redis has not answered (the last round it answered, as rounds come only
        # every INTERVAL_S); None while it answers. A round held up by a busy CPU is not an
        # outage: only a failed one counts.
        self.failing_since: float | None = None
        self._answered = time.monotonic()
        self.woke_at: float | None = None  # when the last wake message arrived (this thread's)
        self._thread: threading.Thread | None = None

    def register(self, control: RedisControl) -> None:
        with self._lock:
            self._controls[control.key] = control
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="flag-watcher", daemon=True)
                self._thread.start()

    def unregister(self, control: RedisControl) -> None:
        with self._lock:
            if self._controls.get(control.key) is control:
                del self._controls[control.key]

    def delete(self, key: str, request: str) -> None:
        """Delete a flag the engine honoured, from this thread (never the loop's), in the
        next round; a newer request stored meanwhile stays."""
        with self._lock:
            self._deletes.append((key, request))

    def _run(self) -> None:
        client: redis.Redis | None = None
        url, listener = None, None
        while True:
            if url != settings.REDIS_URL:  # settings a test changed: its own Redis
                _close(listener)
                client, url, listener = redis_client(), settings.REDIS_URL, None
            client = cast("redis.Redis", client)  # set on the first pass: url starts None
            listener = self._wait(client, listener)
            try:
                self._round(client)
            except Exception as exc:  # an outage: the controls judge it against their grace
                log.debug("control flags not read: %s", exc)
                time.sleep(INTERVAL_S)

    def _wait(self, client: redis.Redis, listener: PubSub | None) -> PubSub | None:
        """Until a request is announced, or INTERVAL_S. A listener that fails is dropped (the
        next wait subscribes again); the rounds go on at their interval meanwhile."""
        try:
            if listener is None:
                listener = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
                listener.subscribe(wake_channel())
            message = listener.get_message(timeout=INTERVAL_S)
            if message is not None:
                self.woke_at = time.time()
                while message is not None:
                    self._take(message["data"])
                    message = listener.get_message(timeout=0)
            return listener
        except Exception as exc:
            log.debug("wake channel not read: %s", exc)
            _close(listener)
            time.sleep(INTERVAL_S)
            return None

    def _take(self, data: bytes | str) -> None:
        """A request as announced (pause_flags.ANNOUNCE): into its session's control at once;
        the round after reads every flag from Redis all the same."""
        try:
            message = json.loads(data)
            key, request = message["key"], message["request"]
        except (ValueError, TypeError, KeyError):
            return  # not an announcement this version makes: the round reads the flags
        with self._lock:
            control = self._controls.get(key)
        if control is not None:
            control.update(request, self.woke_at)

    def _round(self, client: redis.Redis) -> None:
        started = time.monotonic()
        with self._lock:
            deletes, self._deletes = self._deletes, []
            controls = list(self._controls.values())
        try:
            if deletes:
                keys, requests = zip(*deletes, strict=True)
                client.eval(DELETE_HONOURED, len(keys), *keys, *requests)
            values = client.mget([c.key for c in controls]) if controls else []
        except Exception:
            with self._lock:
                self._deletes = deletes + self._deletes  # tried again next round
            if self.failing_since is None:
                self.failing_since = self._answered
            raise
        self.failing_since = None
        if deletes or controls:
            self._answered = started
        for control, raw in zip(controls, values, strict=True):
            control.update(raw, self.woke_at)


# Each key whose value is still the request honoured: a pause asked after a resume must not
# be deleted by the previous pause's late delete (rounds come only every INTERVAL_S).
DELETE_HONOURED = """
for i, key in ipairs(KEYS) do
    if redis.call('GET', key) == ARGV[i] then redis.call('DEL', key) end
end
return 0
"""


def _close(listener: PubSub | None) -> None:
    try:
        if listener is not None:
            listener.close()
    except Exception:  # its connection is gone already
        pass


_watcher: tuple[int, FlagWatcher] | None = None
_watcher_lock = threading.Lock()


def shared() -> FlagWatcher:
    """This process's watcher (a prefork child makes its own: threads do not survive fork)."""
    global _watcher
    with _watcher_lock:
        if _watcher is None or _watcher[0] != os.getpid():
            _watcher = (os.getpid(), FlagWatcher())
        return _watcher[1]
