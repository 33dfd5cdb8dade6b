"""The audit graph of each pause, rollback, flag and failure: built from the stored records when
it happens, built again with the pause's attention once read and with the reviewer's actions
once they ended its story (a resume, a decision), each version hashed into the audit chain.

A graph is always built from the records, never from an earlier graph: the events it reads are
bounded by the sequence number it was first built at (``events_through``), so building it again
later gives the same causes, and an edited graph is never hashed again as if it were true.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import Any

from django.db import transaction

from reviewer.analytics.causal_graph import (
    CLOSING,
    HISTORY,
    SLOW_STORE_MS,
    WINDOW,
    Facts,
    Happening,
    Step,
    build,
)
from reviewer.lifecycle import audit
from reviewer.models import AuditGraph, AuditRecord, PauseEvent, ReviewSession, SessionEvent

ACTION = "audit_graph"  # the chain's record of one version of one graph
OUTSIDE = {"redispatched", "time_told", "time_not_told"}
PEOPLE = {
    "claim",
    "release",
    "reassign",
    "pause_requested",
    "replace_requested",
    "choose_requested",
    "truncate_requested",
    "edit_replace",
    "edit_choose",
    "edit_truncate",
    "edit_append",
    "edit_refused",
    "mute",
    "unmute",
    *CLOSING,
}
# The engine's records that begin the next story: what follows them is not this one's.
NEXT_STORY = {"paused", "generated", "failed"}
STEP_EVENTS = ("token", "edited", "truncated", "rollback")


def digest(graph: dict[str, Any]) -> str:
    content = json.dumps(graph, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(content.encode()).hexdigest()


# --- keeping graphs ----------------------------------------------------------------------


def explain(
    session: ReviewSession,
    subject: str,
    record: AuditRecord,
    position: int,
    pause: PauseEvent | None = None,
) -> AuditGraph:
    """The graph of what ``record`` says happened, kept and hashed into the chain."""
    row = AuditGraph(session=session, subject=subject, record=record, pause=pause)
    row.position = position
    seq = ReviewSession.objects.values_list("last_seq", flat=True).get(pk=session.pk)
    row.graph = {"events_through": seq}
    return keep(row, complete=False)


def refresh(row: AuditGraph, complete: bool) -> AuditGraph:
    """Build ``row`` again from the records (the pause's attention arrived, its story ended)."""
    return keep(row, complete)


def complete_open(session: ReviewSession) -> None:
    """The session ran on or was decided: the stories of its open graphs have ended. Most ends
    have none (nothing flagged or paused the generation): one look, without the lock and the
    savepoint that a rebuild takes."""
    rows = AuditGraph.objects.filter(session=session, complete=False)
    if not rows.exists():
        return
    with transaction.atomic():
        lock(session.pk)
        for row in rows.select_related("record", "pause"):
            refresh(row, complete=True)


def refresh_pause(session_id: int, pause_id: int) -> None:
    """The pause's attention per head was read after it: its graph gains their dispersion,
    unless a resume or a decision completed it meanwhile."""
    with transaction.atomic():
        lock(session_id)
        row = AuditGraph.objects.filter(pause_id=pause_id, complete=False).first()
        if row is not None:
            refresh(row, complete=False)


def lock(session_id: int) -> None:
    """The session's row first, as every writer of its chain records takes it: two rebuilds of
    one graph (a pause's details, a resume) then never interleave."""
    sessions = ReviewSession.objects.select_for_update(no_key=True).filter(pk=session_id)
    sessions.values_list("pk", flat=True).first()


def keep(row: AuditGraph, complete: bool) -> AuditGraph:
    """Build the row's graph and record this version on the chain; a rebuild that changed
    nothing (the pause's attention added no fact) records no second copy."""
    kept_version = (row.digest, row.complete) if row.pk is not None else None
    through = first_built_through(row)
    graph = build(facts(row, through, complete))
    row.graph, row.complete = audit.as_stored({**graph, "events_through": through}), complete
    row.digest = digest(row.graph)
    if kept_version == (row.digest, complete):
        return row
    row.save()
    pause = row.pause_id
    payload = {"graph": row.pk, "subject": row.subject, "pause": pause, "record": row.record_id}
    payload.update(position=row.position, events_through=through)
    payload.update(digest=row.digest, complete=complete)
    audit.append(ACTION, "engine", row.session, payload)
    return row


def first_built_through(row: AuditGraph) -> int:
    """The last event the graph's first version read, as the chain holds it (not as the row
    says: a row may have been edited)."""
    if row.pk is None:
        return int(row.graph["events_through"])
    first = AuditRecord.objects.filter(action=ACTION, payload__graph=row.pk).order_by("id").first()
    if first is not None and "events_through" in first.payload:
        return int(first.payload["events_through"])
    return int(row.graph.get("events_through", 0))


# --- the facts, from the records ---------------------------------------------------------


def facts(row: AuditGraph, through: int, complete: bool) -> Facts:
    session, record = row.session, row.record
    decision, heads, error = subject_decision(row)
    return Facts(
        subject=row.subject,
        position=row.position,
        time=record.created_at.isoformat(),
        decision=decision,
        steps=with_decided(steps(session, row.position, through), row.position, decision),
        heads=heads,
        lines=lines(session.policy_specs),
        before=before(session, record, manual=decision.get("kind") == "manual"),
        after=after(session, record),
        error=error,
        complete=complete,
    )


def subject_decision(row: AuditGraph) -> tuple[dict[str, Any], list[list[float]], str]:
    payload = row.record.payload
    if row.subject == "pause" and row.pause is not None:
        pause = row.pause
        decision = {"policy": pause.trigger, "kind": pause.kind, "reason": pause.reason}
        decision.update(action="pause", evidence=pause.evidence)
        return decision, list((pause.attention or {}).get("heads") or []), ""
    if row.subject == "rollback":
        return dict(payload.get("decision") or {}), [], ""
    if row.subject == "flag":
        return dict(payload), [], ""
    return {}, [], str(payload.get("error", ""))


def with_decided(found: list[Step], position: int, decision: dict[str, Any]) -> list[Step]:
    decided = decided_step(position, decision)
    if not decided:
        return found
    return [*(s for s in found if s.position != position), *decided]


def decided_step(position: int, decision: dict[str, Any]) -> list[Step]:
    """The step the policy decided at, as its evidence says: at a pause the distribution of the
    token not drawn yet; at a flag or rollback the top-1 or entropy the policy read."""
    evidence: dict[str, Any] = decision.get("evidence") or {}
    signals: dict[str, Any] = evidence.get("signals") or evidence
    top1, entropy = signals.get("top1_prob"), signals.get("entropy")
    if not isinstance(top1, float | int) and not isinstance(entropy, float | int):
        return []
    best = (signals.get("alternatives") or [{}])[0].get("text", "")
    return [Step(position, best, top1, entropy)]


def lines(specs: Iterable[dict[str, Any]]) -> dict[str, float]:
    """The lines the session's own policies draw: top-1 (low confidence), similarity (drift)."""
    found: dict[str, float] = {}
    for spec in specs:
        params = spec.get("params") or {}
        if spec.get("kind") == "low_confidence" and "threshold" in params:
            found["top1"] = max(found.get("top1", 0.0), float(params["threshold"]))
        if spec.get("kind") == "drift" and "similarity_threshold" in params:
            found["similarity"] = float(params["similarity_threshold"])
    return found


def steps(session: ReviewSession, position: int, through: int) -> list[Step]:
    """The session's positions before ``position`` as the events up to ``through`` left them
    (an edit or a rollback replaced what it removed)."""
    from reviewer.analytics.case_attention import case_positions

    case = case_positions(session)
    earliest = position - HISTORY - WINDOW
    events = SessionEvent.objects.filter(session=session, seq__lte=through)
    tokens = events.filter(type="token", payload__position__gte=earliest)
    # Only the keys a reading needs: a token's attention row is left out unless it is read.
    keys = ["payload__position", "payload__text", "payload__entropy", "payload__similarity"]
    keys += ["payload__alternatives__0__prob"] + (["payload__attention"] if case else [])
    rows: list[tuple[int, str, dict[str, Any]]] = [
        (seq, "token", dict(zip(TOKEN_KEYS, values, strict=False)))
        for seq, *values in tokens.values_list("seq", *keys)
    ]
    others = events.filter(type__in=STEP_EVENTS).exclude(type="token")
    rows += list(others.values_list("seq", "type", "payload"))
    by_position: dict[int, Step] = {}
    for _, kind, payload in sorted(rows, key=lambda row: row[0]):
        apply_event(by_position, kind, payload, case)
    return [by_position[p] for p in sorted(by_position) if p <= position]


def apply_event(
    by_position: dict[int, Step], kind: str, payload: dict[str, Any], case: AbstractSet[int] | None
) -> None:
    if kind == "token":
        by_position[payload["position"]] = token_step(payload, case)
        return
    cut = payload.get("removed_from" if kind == "rollback" else "token_start", 0)
    for p in [p for p in by_position if p >= cut]:
        del by_position[p]
    for i, token in enumerate(payload.get("tokens") or [], cut):
        by_position[i] = Step(
            i,
            token.get("text", ""),
            token.get("top1"),
            token.get("entropy"),
            token.get("similarity"),
        )


TOKEN_KEYS = ("position", "text", "entropy", "similarity", "top1", "attention")


def token_step(payload: dict[str, Any], case: AbstractSet[int] | None) -> Step:
    row = payload.get("attention") or []
    share = None
    if case and row:
        share = sum(float(v or 0.0) for i, v in enumerate(row) if i in case)
    return Step(
        position=payload["position"],
        text=payload.get("text") or "",
        top1=payload.get("top1"),
        entropy=payload.get("entropy"),
        similarity=payload.get("similarity"),
        case_attention=share,
    )


def before(session: ReviewSession, record: AuditRecord, manual: bool) -> list[Happening]:
    """Outside events since the pause before this one (and the request behind a manual
    pause), with snapshots that were slow to store."""
    records = AuditRecord.objects.filter(session=session, id__lt=record.pk)
    previous = records.filter(action="paused").order_by("-id").first()
    since = previous.pk if previous is not None else 0
    kinds = OUTSIDE | ({"pause_requested"} if manual else set())
    found = [happening(r) for r in records.filter(id__gt=since, action__in=kinds).order_by("id")]
    start = previous.created_at if previous is not None else session.created_at
    slow = SessionEvent.objects.filter(
        session=session, type="snapshot", created_at__gte=start, created_at__lte=record.created_at
    ).filter(payload__ms__gte=SLOW_STORE_MS)
    found += [
        Happening("store_slow", "engine", e.created_at.isoformat(), {"ms": e.payload.get("ms")})
        for e in slow.order_by("seq")
    ]
    return found


def after(session: ReviewSession, record: AuditRecord) -> list[Happening]:
    """What people did after it, until a resume or a decision ended its story."""
    found = []
    records = AuditRecord.objects.filter(session=session, id__gt=record.pk).order_by("id")
    for r in records.exclude(action=ACTION).iterator():
        if r.actor == "engine" and r.action in NEXT_STORY:
            break
        if r.action in PEOPLE:
            found.append(happening(r))
        if r.action in CLOSING:
            break
    return found


def happening(record: AuditRecord) -> Happening:
    kept = ("policy", "lost_worker", "text", "text_before", "text_after", "comment", "error")
    detail = {k: v for k, v in record.payload.items() if k in kept and v not in ("", None)}
    if "paused_s" in record.payload:
        detail["paused_s"] = record.payload["paused_s"]
    return Happening(record.action, record.actor, record.created_at.isoformat(), detail)


# --- checking them -----------------------------------------------------------------------


def tampered() -> list[str]:
    """Every graph that no longer matches the digest the chain holds for it, by what it
    explains; empty when all hold."""
    latest: dict[int, AuditRecord] = {}
    for record in AuditRecord.objects.filter(action=ACTION).order_by("id").iterator():
        latest[int(record.payload.get("graph", 0))] = record
    problems = []
    for row in AuditGraph.objects.select_related("pause").order_by("id").iterator():
        held = latest.pop(row.pk, None)
        if held is None:
            problems.append(f"{describe_row(row)}: the chain holds no digest for it")
        elif digest(row.graph) != held.payload.get("digest"):
            problems.append(
                f"{describe_row(row)} was altered: it does not match the digest in record {held.pk}"
            )
    for graph_id, record in latest.items():
        problems.append(f"{describe_payload(record)} is missing (graph {graph_id})")
    return problems


def describe_row(row: AuditGraph) -> str:
    return describe(row.subject, row.pause_id, row.session_id, row.position)


def describe_payload(record: AuditRecord) -> str:
    payload = record.payload
    subject = str(payload.get("subject", "graph"))
    return describe(subject, payload.get("pause"), record.session_id, payload.get("position"))


def describe(subject: str, pause: int | None, session: int | None, position: Any) -> str:
    if subject == "pause" and pause is not None:
        return f"The audit graph of pause {pause} (session {session}, token {position})"
    return f"The audit graph of the {subject} in session {session} at token {position}"
