"""Session events: the protocol between the worker, the web side and the page. Each event is
numbered per session, stored, then fanned out to the session's websocket group; the consumer
forwards it as it is, as ``{"type", "seq", "session", ...payload}``.

This package owns every kind: one ``TypedDict`` per kind declares its exact payload (``kinds``), and
the builders below are the only places a payload is put together. The engine's own events keep
their names on the wire (``token``, ``pause``, ``rollback``, ``flag``, ``finish``); the rest
are the web side's: ``resumed``, ``edited``, ``truncated`` (a reviewer's rollback to a
position, which the engine applies as an edit), ``attention``, ``muted``, ``status``, ``error``,
``claim`` (who holds a gateway session), and a pause's details that follow it once read
from the frozen state: ``lookahead``, ``pause_attention``, ``snapshot``.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.db.models import Func, IntegerField, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from inference.message import Message
from reviewer.events import layer_loop
from reviewer.events.commit_batch import CommitBatch
from reviewer.events.kinds import (
    ATTENTION,
    CLAIM,
    EDITED,
    ERROR,
    FINISH,
    FLAG,
    KINDS,
    LOOKAHEAD,
    MUTED,
    PAUSE,
    PAUSE_ATTENTION,
    RESUMED,
    ROLLBACK,
    SNAPSHOT,
    STATUS,
    TOKEN,
    TRUNCATED,
    Attention,
    Claim,
    Edited,
    EditReport,
    Error,
    Finish,
    Flag,
    Lookahead,
    Muted,
    Pause,
    PauseAttention,
    PauseReport,
    Resumed,
    Rollback,
    Snapshot,
    Stages,
    Status,
    Token,
    Truncated,
    mismatches,
)
from reviewer.models import ReviewSession, SessionEvent
from reviewer.web.health import group_namespace

if TYPE_CHECKING:  # the web side loads no model code
    from inference.decode import StopInfo
    from inference.edits import EditResult
    from inference.signals import Signals
    from inference.sink import FlagEvent, RollbackEvent, TokenEvent

log = logging.getLogger(__name__)


# --- building payloads ---------------------------------------------------------------------


def round_list(values: Iterable[float | None], digits: int = 4) -> list[float | None]:
    return [round(v, digits) if v is not None else None for v in values]


def token(event: TokenEvent) -> Token:
    signals = event.signals
    assert signals.chosen_prob is not None  # a drawn token always has its probability
    return {
        "position": event.position,
        "token_id": event.token_id,
        "text": event.text,
        "probability": round(signals.chosen_prob, 4),
        "entropy": round(signals.entropy, 4),
        "alternatives": [alt.to_dict() for alt in signals.alternatives],
        # The new token's attention over its context, for the live heatmap.
        "attention": round_list(event.attention or [], 3),
        # Unrounded: a replay of drift over stored sessions compares it with thresholds.
        "similarity": event.similarity,
    }


def pause_report(
    stop: StopInfo,
    signals: Signals,
    attention: dict[str, Any],
    text: str,
    top1_history: Sequence[float],
    entropy_history: Sequence[float],
    lookahead: dict[str, Any] | None = None,
) -> PauseReport:
    """``signals`` describe the next token; ``attention`` is the engine's view at the pause."""
    decision = stop.decision
    if decision is None:
        raise ValueError("a pause report needs the decision behind the pause")
    manual = decision.kind == "manual"
    return {
        "position": stop.position,
        "trigger": "manual" if manual else decision.policy,
        "kind": "manual" if manual else decision.kind,
        "reason": decision.reason,
        "evidence": {**decision.evidence, "signals": signals.to_dict()},
        "span": list(decision.span) if decision.span else None,
        "decisions": [d.to_dict() for d in stop.decisions],
        "alternatives": [alt.to_dict() for alt in signals.alternatives],
        "attention": _rounded_attention(attention),
        "text": text,
        "history": {
            "probability": round_list(top1_history),
            "entropy": round_list(entropy_history),
        },
        "lookahead": lookahead or LOOKAHEAD_PENDING,
    }


def reopened_pause(position: int, reason: str, text: str) -> PauseReport:
    """A generated text reopened for a correction: a pause at its end that no decision of the
    engine made; the edit's report brings the alternatives, its details the rest."""
    return {
        "position": position,
        "trigger": "manual",
        "kind": "reopen",
        "reason": reason,
        "evidence": {},
        "span": None,
        "decisions": [],
        "alternatives": [],
        "attention": {},
        "text": text,
        "history": {"probability": [], "entropy": []},
        "lookahead": LOOKAHEAD_PENDING,
    }


# Sent in the pause (or edit) event while the look-ahead is still being computed.
LOOKAHEAD_PENDING: dict[str, Any] = {"branches": [], "ms": 0, "pending": True}


def detail_of(pause_id: int, edit: int | None, position: int) -> dict[str, Any]:
    """The open pause a detail belongs to (see ``kinds._PauseDetail``)."""
    return {"pause_id": pause_id, "edit": edit, "position": position}


def lookahead(of: Mapping[str, Any], branches: list[dict[str, Any]], ms: float) -> Lookahead:
    return cast(Lookahead, {**of, "branches": branches, "ms": ms})


def pause_attention(of: Mapping[str, Any], attention: dict[str, Any]) -> PauseAttention:
    return cast(PauseAttention, {**of, "attention": _rounded_attention(attention)})


def snapshot(of: Mapping[str, Any], size: int, ms: float) -> Snapshot:
    return cast(Snapshot, {**of, "bytes": size, "ms": ms})


def _rounded_attention(attention: dict[str, Any]) -> dict[str, Any]:
    if not attention:
        return {}
    return {
        **attention,
        "layers": [round_list(row) for row in attention["layers"]],
        "heads": [round_list(row) for row in attention["heads"]],
    }


def pause(report: PauseReport, pause_id: int, latency: float | None, stages: Stages) -> Pause:
    return {**report, "pause_id": pause_id, "latency_ms": latency, "stages": stages}


def resumed(position: int) -> Resumed:
    return {"position": position}


def edit_report(
    result: EditResult,
    alternatives: Iterable[Any],
    pieces: Sequence[str],
    top1_history: Sequence[float],
    entropy_history: Sequence[float],
    similarity_history: Sequence[float | None],
    lookahead: dict[str, Any] | None = None,
    attention: dict[str, Any] | None = None,
) -> EditReport:
    """``pieces`` are the texts of the tokens from ``result.token_start`` on: the page shows
    them one by one, each with the top-1 probability and entropy of its distribution (and
    its similarity to the prompt, for replaying drift over the edited text)."""
    top1, entropy = round_list(top1_history), round_list(entropy_history)
    tokens = [
        {"text": text, "top1": top1[i], "entropy": entropy[i], "similarity": similarity_history[i]}
        for i, text in enumerate(pieces, result.token_start)
    ]
    report = {
        **result.to_dict(),
        "alternatives": [alt.to_dict() for alt in alternatives],
        "tokens": tokens,
        "lookahead": lookahead or LOOKAHEAD_PENDING,
        "attention": _rounded_attention(attention or {}),
    }
    return cast(EditReport, report)


def edit_applied(report: EditReport, edit: int, text: str, token_ids: list[int]) -> Edited:
    """The payload of an ``edited`` or ``truncated`` event (see ``edit_kind``)."""
    return {**report, "edit": edit, "text": text, "token_ids": token_ids}


def edit_kind(edit_kind: str) -> str:
    """The event kind an applied edit of this kind is sent as."""
    return TRUNCATED if edit_kind == "truncate" else EDITED


def rollback(event: RollbackEvent) -> Rollback:
    payload = event.to_dict()
    del payload["type"]  # the engine's name is the event's type
    return payload  # type: ignore[return-value]


def flag(event: FlagEvent) -> Flag:
    return cast(Flag, {"position": event.position, **event.decision.to_dict()})


def attention(layer: int, heads: Iterable[Sequence[float]], position: int) -> Attention:
    return {"layer": layer, "heads": [round_list(row) for row in heads], "position": position}


def finish(reason: str, text: str, cut: Mapping[str, Any] | None = None) -> Finish:
    """``cut``: a stop string cut off the text's end, as an edit carries its tokens."""
    payload: Finish = {"reason": reason, "text": text}
    if cut:
        payload["cut"] = dict(cut)
    return payload


def muted(policy: str, is_muted: bool, muted_policies: list[str]) -> Muted:
    return {"policy": policy, "muted": is_muted, "muted_policies": list(muted_policies)}


def claim(claimed_by: str | None, expires_at: str | None, action: str) -> Claim:
    return {"claimed_by": claimed_by, "expires_at": expires_at, "action": action}


def status(value: str) -> Status:
    return {"status": value}


def error(message: str, edit: int | None = None) -> Error:
    """An error to show; an engine Message keeps its template and values, so that each page
    shows it in its own language (reviewer/web/consumers.py)."""
    out: Error = {"message": str(message)}
    if isinstance(message, Message):
        out |= {"template": message.template, "values": message_values(message)}
    if edit is not None:
        out["edit"] = edit
    return out


def message_values(message: Message) -> dict[str, Any]:
    """A Message's values as JSON keeps them (see stored_value)."""
    return {key: stored_value(value) for key, value in message.values.items()}


def stored_value(value: Any) -> Any:
    """A Message as its own template and values (``{"template", "values"}``); a number or
    text as is; anything else as text."""
    if isinstance(value, Message):
        return {"template": value.template, "values": message_values(value)}
    return value if isinstance(value, int | float | str) else str(value)


# --- storing and sending -------------------------------------------------------------------


def group_name(session_id: int) -> str:
    # The namespace (database and queue) keeps installations sharing one Redis apart.
    return f"session-{group_namespace()}-{session_id}"


def next_seq(session_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE reviewer_reviewsession SET last_seq = last_seq + 1 WHERE id = %s RETURNING last_seq",
            [session_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise ReviewSession.DoesNotExist(f"Session {session_id} does not exist")
    return int(row[0])


def emit(session_id: int, type: str, payload: Mapping[str, Any] | None = None) -> SessionEvent:
    """Store the event; broadcast it once the surrounding transaction commits."""
    return emit_many(session_id, type, [payload or {}])[0]


# One statement numbers and stores a run of events: one round trip to Postgres, atomic on its
# own (a worker's relay writes outside any transaction, and every round trip there waits for
# a core that the model keeps busy).
STORE_EVENTS = """
WITH numbered AS (
    UPDATE reviewer_reviewsession SET last_seq = last_seq + %(n)s WHERE id = %(session)s
    RETURNING last_seq
)
INSERT INTO reviewer_sessionevent (session_id, seq, type, payload, created_at)
SELECT %(session)s, numbered.last_seq - %(n)s + run.i, %(type)s, run.payload::jsonb, %(now)s
FROM numbered, unnest(%(payloads)s::text[]) WITH ORDINALITY AS run(payload, i)
RETURNING id, seq
"""


class Encoded(dict[str, Any]):
    """An event's payload with its JSON text, encoded ahead of its write (a relay does while it
    waits for the rest of a run of tokens)."""

    def __init__(self, payload: Mapping[str, Any]) -> None:
        super().__init__(payload)
        self.text = json.dumps(self)


def emit_many(
    session_id: int, type: str, payloads: Sequence[Mapping[str, Any]]
) -> list[SessionEvent]:
    """Store events of one kind, numbered one after another in the order given; broadcast
    them, in that order, once the surrounding transaction commits (at once outside one)."""
    assert type in KINDS, type
    if not payloads:
        return []
    now = timezone.now()
    texts = [p.text if isinstance(p, Encoded) else json.dumps(dict(p)) for p in payloads]
    params: dict[str, Any] = {"n": len(texts), "session": session_id, "type": type, "now": now}
    with connection.cursor() as cursor:
        cursor.execute(STORE_EVENTS, {**params, "payloads": texts})
        rows = sorted(cursor.fetchall(), key=lambda row: row[1])
    if not rows:
        raise ReviewSession.DoesNotExist(f"Session {session_id} does not exist")
    stored = [
        SessionEvent(
            id=pk, session_id=session_id, seq=seq, type=type, payload=dict(p), created_at=now
        )
        for (pk, seq), p in zip(rows, payloads, strict=True)
    ]
    _after_commit.add(stored)
    return stored


def broadcast(event: SessionEvent) -> None:
    broadcast_all([event])


def broadcast_all(stored: Sequence[SessionEvent]) -> None:
    """Best effort: the events are stored already, and a page that missed one (Redis out of
    reach, a dropped socket) fetches it by sequence number. A failed broadcast never fails
    the segment or the command that caused it. One session's events go in one message, in
    order (``session.event`` for one, ``session.events`` for more), sent from this thread's
    own event loop (reviewer/events/layer_loop.py)."""
    global _broadcast_failing
    layer = get_channel_layer()
    try:
        if layer is None:
            raise RuntimeError("no channel layer is configured")
        for group, message in _messages(stored):
            layer_loop.run(layer.group_send(group, message))
    except Exception as exc:
        if not _broadcast_failing:
            log.warning("events are stored but not broadcast (%s: %s)", type(exc).__name__, exc)
        _broadcast_failing = True
        return
    if _broadcast_failing:
        log.info("events are broadcast again")
    _broadcast_failing = False


# What one transaction stores goes out as one message per session (a generation's end: its
# statuses and finish), so a page or a gateway call wakes once for it. broadcast_all is looked
# up when sent (tests replace it).
_after_commit: CommitBatch[SessionEvent] = CommitBatch(lambda stored: broadcast_all(stored))


def _messages(stored: Sequence[SessionEvent]) -> list[tuple[str, dict[str, Any]]]:
    """A message per run of one session's events, in the order stored."""
    out: list[tuple[str, dict[str, Any]]] = []
    for session_id, run in itertools.groupby(stored, key=lambda event: event.session_id):
        sent = [event.to_message() for event in run]
        message = (
            {"type": "session.event", "event": sent[0]}
            if len(sent) == 1
            else {"type": "session.events", "events": sent}
        )
        out.append((group_name(session_id), message))
    return out


_broadcast_failing = False


REPLAY_LIMIT = 5000  # events a replay (a socket's, or one /api/ call) sends at most
REPLAY_ROWS = 200  # rows read at a time: no more than that is held beyond the page itself
JSON_BYTES = Func(
    Cast("payload", output_field=TextField()), function="octet_length", output_field=IntegerField()
)


def events_after(session_id: int, after: int, limit: int = REPLAY_LIMIT) -> list[dict[str, Any]]:
    return events_page(session_id, after, limit)[0]


def events_page(
    session_id: int, after: int, limit: int = REPLAY_LIMIT
) -> tuple[list[dict[str, Any]], bool]:
    """The stored events after ``after``, oldest first: at most ``limit``, and about
    settings.CAESURA_EVENTS_PAGE_BYTES of JSON (always at least one), since each token event
    of a long session carries an attention row over its whole context. True with them when
    the size cut the page short: more follow after its last one."""
    budget, size = settings.CAESURA_EVENTS_PAGE_BYTES, 0
    page: list[dict[str, Any]] = []
    while len(page) < limit:
        wanted = min(REPLAY_ROWS, limit - len(page))
        rows = SessionEvent.objects.filter(session_id=session_id, seq__gt=after).order_by("seq")
        # The sizes first (Postgres measures, nothing is sent), then only the rows that fit.
        sizes = list(rows.annotate(json_bytes=JSON_BYTES).values_list("seq", "json_bytes")[:wanted])
        fitting: list[int] = []
        cut = False
        for seq, json_bytes in sizes:
            if (page or fitting) and size + json_bytes > budget:
                cut = True
                break
            fitting.append(seq)
            size += json_bytes
        if fitting:
            page += [row.to_message() for row in rows.filter(seq__lte=fitting[-1])]
            after = fitting[-1]
        if cut or len(sizes) < wanted:
            return page, cut
    return page, False


__all__ = [
    "ATTENTION",
    "Attention",
    "CLAIM",
    "Claim",
    "EDITED",
    "ERROR",
    "EditReport",
    "Edited",
    "Error",
    "FINISH",
    "FLAG",
    "Finish",
    "Flag",
    "KINDS",
    "LOOKAHEAD",
    "LOOKAHEAD_PENDING",
    "Lookahead",
    "MUTED",
    "Muted",
    "PAUSE",
    "Pause",
    "PAUSE_ATTENTION",
    "PauseAttention",
    "PauseReport",
    "RESUMED",
    "ROLLBACK",
    "Resumed",
    "Rollback",
    "SNAPSHOT",
    "STATUS",
    "Snapshot",
    "Status",
    "TOKEN",
    "TRUNCATED",
    "Token",
    "Truncated",
    "mismatches",
]
