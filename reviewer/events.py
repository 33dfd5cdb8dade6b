"""Session events: numbered per session, stored, then fanned out to the session's websocket group.

One vocabulary of event types: token, paused, resumed, edited, rolled_back, flagged,
finished, status, error. The consumer forwards them as they are.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection, transaction

from reviewer.models import ReviewSession, SessionEvent

log = logging.getLogger(__name__)

EVENT_TYPES = {
    "attention",
    "token",
    "paused",
    "resumed",
    "edited",
    "rolled_back",
    "flagged",
    "finished",
    "status",
    "error",
}


def group_name(session_id: int) -> str:
    # The database name keeps two installations sharing one Redis (e.g. tests) apart.
    return f"session-{settings.DATABASES['default']['NAME']}-{session_id}"


def next_seq(session_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE reviewer_reviewsession SET last_seq = last_seq + 1 WHERE id = %s RETURNING last_seq",
            [session_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise ReviewSession.DoesNotExist(f"Session {session_id} does not exist")
    return row[0]


def emit(session_id: int, type: str, payload: dict | None = None) -> SessionEvent:
    """Store the event; broadcast it once the surrounding transaction commits."""
    assert type in EVENT_TYPES, type
    with transaction.atomic():
        event = SessionEvent.objects.create(
            session_id=session_id, seq=next_seq(session_id), type=type, payload=payload or {}
        )
        transaction.on_commit(lambda: broadcast(event))
    return event


def broadcast(event: SessionEvent) -> None:
    """Best effort: the event is stored already, and a page that missed it (Redis out of
    reach, a dropped socket) fetches it by sequence number. A failed broadcast never fails
    the segment or the command that caused it."""
    global _broadcast_failing
    layer = get_channel_layer()
    try:
        async_to_sync(layer.group_send)(
            group_name(event.session_id), {"type": "session.event", "event": event.to_message()}
        )
    except Exception as exc:
        if not _broadcast_failing:
            log.warning("events are stored but not broadcast (%s: %s)", type(exc).__name__, exc)
        _broadcast_failing = True
        return
    if _broadcast_failing:
        log.info("events are broadcast again")
    _broadcast_failing = False


_broadcast_failing = False


def events_after(session_id: int, after: int, limit: int = 5000) -> list[dict]:
    rows = SessionEvent.objects.filter(session_id=session_id, seq__gt=after).order_by("seq")[:limit]
    return [row.to_message() for row in rows]
