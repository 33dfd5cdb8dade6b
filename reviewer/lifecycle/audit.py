"""The audit chain: append-only records, each hashing its content and its predecessor's hash."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from reviewer.models import AuditRecord, ReviewSession

GENESIS = "0" * 64
# Serializes appends across processes so two writers never fork the chain.
CHAIN_LOCK = 0x_CAE5_0A0D


def record_hash(
    prev_hash: str,
    session_id: int | None,
    actor: str,
    action: str,
    payload: dict[str, Any],
    created_at: datetime,
) -> str:
    content = json.dumps(
        [prev_hash, session_id, actor, action, payload, created_at.isoformat()],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(content.encode()).hexdigest()


class _Head(threading.local):
    """The record this thread's transaction appended last, and the session rows it locked:
    while that record stands, the transaction holds the chain's lock and that record is the
    chain's head. ``marker``: a no-op commit hook registered with the record, which a rollback
    of the record's savepoint (or of the transaction) drops with it."""

    marker: Any = None
    hash: str = GENESIS
    sessions: frozenset[int] = frozenset()


_head = _Head()


def append(
    action: str,
    actor: str,
    session: ReviewSession | None = None,
    payload: Mapping[str, Any] | None = None,
) -> AuditRecord:
    """Add a record at the chain's head. The chain's lock is held from here to the commit, so
    appends that end together (a worker's sessions) queue for it: a transaction that appended
    already neither locks nor reads the head again, and none opens a savepoint of its own,
    which keeps the time others wait short."""
    session_id = session.pk if session is not None else None
    with transaction.atomic(savepoint=False):  # a failed append fails its whole transaction
        prev_hash = _held_head(session_id)
        if prev_hash is None:
            prev_hash = _lock_and_read_head(session_id)
        created_at = timezone.now()
        stored = as_stored(payload or {})  # hash what a verification will read back
        record = AuditRecord.objects.create(
            session_id=session_id,
            actor=actor,
            action=action,
            payload=stored,
            created_at=created_at,
            prev_hash=prev_hash,
            hash=record_hash(prev_hash, session_id, actor, action, stored, created_at),
        )
        _remember(record)
        return record


def as_stored(value: Any) -> Any:
    """``value`` as a JSON column gives it back. PostgreSQL keeps a JSON number as a decimal:
    -0.0 (an entropy of a certain token) comes back as 0.0, and a float that JSON writes with
    an exponent (1e+16) as an integer. A hash over anything else would not verify."""
    return json.loads(json.dumps(value, default=str), parse_float=_stored_number)


def _stored_number(text: str) -> float | int:
    number = float(text)
    if number == 0:
        return 0.0
    return int(number) if "e+" in text else number  # 1e+16 and up are whole numbers


def _held_head(session_id: int | None) -> str | None:
    """The head this transaction appended, if it still stands (None: lock and read it)."""
    if _head.marker is None or not any(
        hook is _head.marker for _sids, hook, *_ in connection.run_on_commit
    ):
        return None
    if session_id is not None and session_id not in _head.sessions:
        _lock_session(session_id)
        _head.sessions |= {session_id}
    return _head.hash


def _lock_and_read_head(session_id: int | None) -> str:
    if session_id is not None:
        _lock_session(session_id)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK])
    _head.sessions = frozenset() if session_id is None else frozenset({session_id})
    last = AuditRecord.objects.order_by("-id").only("hash").first()
    return last.hash if last else GENESIS


def _lock_session(session_id: int) -> None:
    # Lock order everywhere: the session row, then the chain. Web commands hold the row
    # already; taking it here first keeps a worker's report from deadlocking them.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM reviewer_reviewsession WHERE id = %s FOR NO KEY UPDATE", [session_id]
        )


def _remember(record: AuditRecord) -> None:
    def marker() -> None:
        pass

    transaction.on_commit(marker)
    _head.marker, _head.hash = marker, record.hash


def first_broken_record() -> tuple[AuditRecord, str] | None:
    """The first record whose hash or link does not hold, with what is wrong; None if intact."""
    prev_hash = GENESIS
    for record in AuditRecord.objects.order_by("id").iterator():
        if record.prev_hash != prev_hash:
            return record, "its prev_hash does not match the previous record's hash"
        expected = record_hash(
            record.prev_hash,
            record.session_id,
            record.actor,
            record.action,
            record.payload,
            record.created_at,
        )
        if record.hash != expected:
            return record, "its content does not match its hash"
        prev_hash = record.hash
    return None
