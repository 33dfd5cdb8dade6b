"""The audit chain: append-only records, each hashing its content and its predecessor's hash."""

from __future__ import annotations

import hashlib
import json
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


def append(
    action: str,
    actor: str,
    session: ReviewSession | None = None,
    payload: Mapping[str, Any] | None = None,
) -> AuditRecord:
    with transaction.atomic():
        with connection.cursor() as cursor:
            if session is not None:
                # Lock order everywhere: the session row, then the chain. Web commands hold the
                # row already; taking it here first keeps a worker's report from deadlocking them.
                cursor.execute(
                    "SELECT 1 FROM reviewer_reviewsession WHERE id = %s FOR NO KEY UPDATE",
                    [session.pk],
                )
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK])
        last = AuditRecord.objects.order_by("-id").only("hash").first()
        prev_hash = last.hash if last else GENESIS
        created_at = timezone.now()
        stored = json.loads(json.dumps(payload or {}, default=str))  # store what was hashed
        session_id = session.pk if session is not None else None
        return AuditRecord.objects.create(
            session_id=session_id,
            actor=actor,
            action=action,
            payload=stored,
            created_at=created_at,
            prev_hash=prev_hash,
            hash=record_hash(prev_hash, session_id, actor, action, stored, created_at),
        )


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
