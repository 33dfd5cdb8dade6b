"""Session failures this worker could not record. ``relay.record_failure`` tries for about a
minute; through a longer Postgres outage the session would show as running for as long as
the worker lives, since no sweep takes back a live worker's sessions. Such failures are kept
here, and the heartbeat (reviewer/worker/heartbeat.py) tries them again until they are
written. ``lifecycle.fail`` names the segment that failed, so a session that another worker
took over meanwhile, or that a newer segment carries on, is left as it is."""

from __future__ import annotations

import logging
import threading

from django.db import DatabaseError

from reviewer import lifecycle

log = logging.getLogger(__name__)

_lock = threading.Lock()
_kept: dict[int, tuple[str, str | None]] = {}  # session id -> (error, segment), oldest first


def keep(session_id: int, error: str, segment: str | None) -> None:
    with _lock:
        _kept.pop(session_id, None)  # a newer segment's failure replaces the older one
        _kept[session_id] = (error, segment)


def kept() -> list[int]:
    with _lock:
        return list(_kept)


def record() -> int:
    """Record the kept failures, oldest first. A database error stops the round (Postgres is
    still out of reach): it is raised, and the rest wait for the next one. How many were
    recorded."""
    with _lock:
        waiting = list(_kept.items())
    recorded = 0
    for session_id, failure in waiting:
        try:
            lifecycle.fail(session_id, *failure)
        except DatabaseError:
            raise
        except Exception:  # not the outage: trying again would fail the same way
            log.exception("session %s: its failure cannot be recorded; dropped", session_id)
        else:
            recorded += 1
            log.warning("session %s: its failure is recorded now that Postgres is back", session_id)
        with _lock:
            if _kept.get(session_id) == failure:
                del _kept[session_id]
    return recorded
