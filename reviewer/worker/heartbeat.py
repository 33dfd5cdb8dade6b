"""This worker process's heartbeat: it holds its liveness lock, announces itself for
/healthz, and every second takes back the sessions of workers that died (its own previous
incarnation's included), with the commands left in their own queues."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import close_old_connections

from reviewer import lifecycle
from reviewer.web.health import ALIVE_TTL_S, alive_key, loading_key, redis_client
from reviewer.worker import dispatch, liveness, unrecorded_failures

_T = TypeVar("_T")

log = logging.getLogger(__name__)

SWEEP_S = 1  # seconds between two looks for sessions whose worker died
RETAKE_QUIET_S = 5  # no sweep for this long after this worker had to take its lock again
# Lapsed claims are dropped (audited, and the domain's queue pages told) at this pace even when
# nobody reads a queue; a lapsed claim is never honoured meanwhile (claims.holder).
CLAIM_SWEEP_S = 15
# Failures a segment could not record through an outage are tried again at this pace.
FAILURE_RETRY_S = 10


class _Beat:
    """The running beat: once stopped it announces nothing more (a worker that could not load
    its engine says so and exits; a last beat must not announce it alive meanwhile)."""

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.lock = threading.Lock()  # an announcement and the stop, one after the other


_beat = _Beat()


def start(hostname: str) -> threading.Thread:
    """Hold this process's liveness lock, announce it in Redis for /healthz, and every second
    take back the sessions of workers that died (this one's previous incarnation included).
    It says the worker loads its model until ``loaded``."""
    global _beat
    _beat = current = _Beat()
    loading.set()
    liveness.hold(hostname)
    _guarded("orphan sweep", recover_orphans)  # a previous incarnation's sessions, at once
    _guarded("heartbeat", lambda: announce(hostname))

    def beat() -> None:
        quiet_until, next_claim_sweep, next_failure_retry = 0.0, 0.0, 0.0
        while not current.stopped.wait(SWEEP_S):
            if _guarded("liveness lock", lambda: liveness.hold(hostname)):
                # Lost with the connection: Postgres restarted, or was out of reach. The
                # other workers are taking their locks again too; give them time to.
                quiet_until = time.monotonic() + RETAKE_QUIET_S
            if time.monotonic() >= quiet_until:
                _guarded("orphan sweep", recover_orphans)
            _guarded("heartbeat", lambda: announce(hostname))
            if time.monotonic() >= next_claim_sweep:
                _guarded("claim sweep", lifecycle.expire_lapsed)
                next_claim_sweep = time.monotonic() + CLAIM_SWEEP_S
            if unrecorded_failures.kept() and time.monotonic() >= next_failure_retry:
                _guarded("recording failures", unrecorded_failures.record)
                next_failure_retry = time.monotonic() + FAILURE_RETRY_S
            close_old_connections()

    thread = threading.Thread(target=beat, name="caesura-heartbeat", daemon=True)
    thread.start()
    return thread


# Set while the model loads (reviewer/worker/tasks.py): the beat says so, for /healthz and
# for a session page that would otherwise show a running session and no text for minutes.
loading = threading.Event()


def loading_model(hostname: str, load: Callable[[], object]) -> None:
    """Load the model; then (loaded, or failed and left to a task to load again) the beat no
    longer says it loads, at once rather than at the next beat."""
    try:
        load()
    finally:
        loading.clear()
        _guarded("heartbeat", lambda: announce(hostname))


def announce(hostname: str) -> None:
    with _beat.lock:
        if _beat.stopped.is_set():
            return
        client = redis_client()
        client.set(alive_key(hostname), time.time(), ex=ALIVE_TTL_S)
        if loading.is_set():
            client.set(loading_key(hostname), 1, ex=ALIVE_TTL_S)
        else:
            client.delete(loading_key(hostname))


def _guarded(what: str, step: Callable[[], _T]) -> _T | None:
    """One failing step (Redis or Postgres out of reach) must neither kill the thread nor
    keep the others from running. The step's result, None if it failed."""
    try:
        return step()
    except Exception as exc:
        log.warning("%s failed: %s: %s", what, type(exc).__name__, exc)
        return None


def stop(hostname: str) -> None:
    with _beat.lock:  # after an announcement under way, before any other
        _beat.stopped.set()
    redis_client().delete(alive_key(hostname), loading_key(hostname))


def recover_orphans() -> list[int]:
    alive = liveness.alive()
    orphans = lifecycle.orphaned_sessions(alive)
    for session_id, lost in orphans:
        log.warning("session %s lost its worker %s; restarting its segment", session_id, lost)
        lifecycle.redispatch(session_id, lost)
    hand_over_dead_queues(alive, {lost for _, lost in orphans})
    return [session_id for session_id, _ in orphans]


def hand_over_dead_queues(alive: liveness.AliveWorkers, lost: set[str]) -> None:
    """Commands left in the own queue of a worker that died and did not come back under its
    name (an attention request, an edit or a resume sent as it died) go to the shared queue.
    A segment redispatched meanwhile makes a handed-over segment stale: it is skipped.

    Senders look at the lock before they pick a queue, so only what was sent around the
    moment of death lands there: each dead name's queue is watched for a minute."""
    workers = lost | lifecycle.workers_with_live_sessions()
    hosts = {liveness.hostname_of(w) for w in workers}
    now = time.monotonic()
    for hostname, since in list(_dead_since.items()):
        if hostname not in hosts and now - since >= DEAD_QUEUE_WATCH_S:
            del _dead_since[hostname]  # watched long enough, and no session names it
    for hostname in hosts:
        if alive.runs_under(hostname):
            _dead_since.pop(hostname, None)
        else:
            _dead_since.setdefault(hostname, now)
    watched = sorted(h for h, since in _dead_since.items() if now - since < DEAD_QUEUE_WATCH_S)
    for hostname, moved in dispatch.hand_over_queues(watched).items():
        log.warning("%d command(s) left for dead worker %s handed over", moved, hostname)


DEAD_QUEUE_WATCH_S = 60
_dead_since: dict[str, float] = {}  # dead worker names, by when this process first saw them
