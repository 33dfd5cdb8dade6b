"""What a worker reports: facts about a segment (it began, a token, a checkpoint, an edit
applied or refused, where and why the engine stopped). The decisions those facts lead to
(a cancel beats a pause, which state follows a stop) are taken here, not in the worker."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from reviewer import events
from reviewer.analytics import metrics
from reviewer.lifecycle import audit, audit_graph, gateway
from reviewer.lifecycle.record import StoredRecord
from reviewer.lifecycle.transitions import (
    S,
    SegmentSuperseded,
    finish,
    kept,
    locked,
    set_status,
)
from reviewer.models import AuditRecord, Edit, PauseEvent, ReviewSession, statuses
from reviewer.worker import dispatch, pause_flags

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StopReport:
    """Where and why the engine stopped a segment, as the worker saw it."""

    reason: str  # the engine's: "pause" | "eos" | "stop" | "max_tokens" | "cancel"
    position: int  # generated tokens when it stopped
    pause: events.PauseReport | None = None  # what the page shows, when it paused
    requested_at: float | None = None  # when a reviewer asked for the pause it honoured
    # Whether a cancel request waits now (the worker reads its control key). Asked once the
    # session's row is locked: a cancel command sets its request while it holds that lock.
    cancel_waiting: Callable[[], bool] = lambda: False
    halted_at: float | None = None  # when the engine stopped (before the pause was described)
    # A manual pause: when its request reached each stage on the worker (epoch seconds; see
    # stages_ms)
    stamps: Mapping[str, float] | None = None
    cut: Mapping[str, Any] | None = None  # a stop string cut off the text (worker/request.py)


# --- a segment ---------------------------------------------------------------------------


def begin_segment(session_id: int, segment: str, worker: str) -> ReviewSession | None:
    """Claim a segment for this worker; None when the segment is stale or the session is done."""
    with transaction.atomic():
        # The domain comes with it (its prompt, delivery and metrics label), unlocked.
        sessions = S.objects.select_related("domain").select_for_update(of=("self",))
        session = sessions.filter(pk=session_id).first()
        if session is None or session.segment != segment or session.is_final:
            return None
        session.worker = worker
        session.save(update_fields=["worker", "updated_at"])
        return session


def generates(session: ReviewSession) -> bool:
    """Whether the segment goes on to generate; a segment that only applied edits at a pause
    leaves the session paused."""
    session.refresh_from_db(fields=["status"])
    return session.status == S.RUNNING


def has_ended(session: ReviewSession) -> bool:
    """Ended (approved, cancelled) meanwhile: whatever the worker kept for it can go."""
    session.refresh_from_db(fields=["status"])
    return session.is_final


def ended_meanwhile(session: ReviewSession) -> bool:
    """Cancelled or decided since the worker read it, asked under the row's lock (in the
    caller's transaction): nothing the worker made since may land on it then."""
    return locked(session.pk).is_final


def paused_session(session_id: int) -> ReviewSession | None:
    return S.objects.filter(pk=session_id, status=S.PAUSED).first()


def record_prompt(session: ReviewSession, prompt_ids: list[int]) -> None:
    session.prompt_ids = prompt_ids
    session.save(update_fields=["prompt_ids", "updated_at"])


def record_note(session: ReviewSession, text: str, position: int) -> None:
    """The worker gave the model the note services left for it (the time, after a long
    pause): in its context before generated token ``position``, not in the text."""
    with transaction.atomic():
        S.objects.filter(pk=session.pk).update(pending_note="")
        session.pending_note = ""
        told = {"text": text, "position": position, "time": timezone.now().isoformat()}
        audit.append("time_told", "engine", session, told)


def record_note_refused(session: ReviewSession, why: str) -> None:
    """The backend cannot give the model a note: the session goes on without it, on record."""
    with transaction.atomic():
        S.objects.filter(pk=session.pk).update(pending_note="")
        session.pending_note = ""
        audit.append("time_not_told", "engine", session, {"error": why})


def record_token(session: ReviewSession, token: events.Token) -> None:
    events.emit(session.pk, events.TOKEN, token)


def record_released_tokens(session: ReviewSession, payloads: Sequence[Mapping[str, Any]]) -> None:
    """Tokens of a delayed gateway generation that let more of its text leave, stored with
    that text (their largest ``released``) locked for the application in one commit: the
    stream sends it as the tokens arrive, without a statement of its own. A token releases
    by delayed delivery's rule (the relay applies it as the gateway does), or, the last of a
    generation that ended by itself and that the system approves (its domain allows it,
    nothing paused it, no cancel waits), the whole final text: nobody can change it from here
    on, so the held last sentence leaves at once, not after the end's record and the approval
    (reviewer/gateway/delivery.py). The engine's delivery floor keeps its own rollbacks above
    the same boundary (inference/decode.py); a reviewer's edit there is refused. A session
    that no longer runs locks nothing more: its tokens are stored without ``released``, so no
    stream takes them for locked."""
    chars = max(int(token["released"]) for token in payloads if "released" in token)
    with transaction.atomic():
        running = S.objects.filter(pk=session.pk, status=S.RUNNING)
        if not running.update(released_chars=Greatest("released_chars", Value(chars))):
            payloads = [events.Encoded(_unreleased(token)) for token in payloads]
        events.emit_many(session.pk, events.TOKEN, payloads)


def _unreleased(token: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in token.items() if key != "released"}


def store_record(session: ReviewSession, record: StoredRecord) -> None:
    """Persist the state record so far (reviewer/lifecycle/record.py); events after ids_seq
    hold what came since.

    Only the segment that owns the session may write: a superseded one is told to stop."""
    generated_ids, text, meta = record.generated_ids, record.text, record.engine_meta
    session.generated_ids, session.text, session.engine_meta = generated_ids, text, meta
    session.ids_seq = S.objects.values_list("last_seq", flat=True).get(pk=session.pk)
    written = S.objects.filter(pk=session.pk, segment=session.segment).update(
        generated_ids=generated_ids,
        text=text,
        engine_meta=meta,
        ids_seq=session.ids_seq,
        updated_at=timezone.now(),
    )
    if not written:
        raise SegmentSuperseded(f"Session {session.pk}: segment {session.segment} was superseded")


def record_flag(session: ReviewSession, flag: events.Flag) -> None:
    with transaction.atomic():
        record = audit.append("flagged", "engine", session, flag)
        events.emit(session.pk, events.FLAG, flag)
    _explain(session, "flag", record, flag["position"])


def record_rollback(session: ReviewSession, rollback: events.Rollback) -> None:
    metrics.rollback("engine")
    # The audit record keeps the engine event's own name in it, as it always has.
    with transaction.atomic():
        record = audit.append("rolled_back", "engine", session, {"type": "rollback", **rollback})
        events.emit(session.pk, events.ROLLBACK, rollback)
    _explain(session, "rollback", record, rollback["removed_from"])


def _explain(
    session: ReviewSession,
    kind: str,
    record: AuditRecord,
    position: int,
    pause: PauseEvent | None = None,
) -> None:
    """The event's causal graph, built once the event itself is stored and sent: the page
    never waits for it, and a graph that cannot be built never costs the event."""
    try:
        with transaction.atomic():
            if kind == "pause":
                audit_graph.complete_open(session)  # the flags and rollbacks before it
            audit_graph.explain(session, kind, record, position, pause=pause)
    except Exception:
        log.exception("session %s: the %s's audit graph was not built", session.pk, kind)


# --- the end of a segment ----------------------------------------------------------------


def record_stop(session: ReviewSession, stop: StopReport) -> str:
    """The engine stopped: decide what that means for the session. The reason it stands for
    ("pause", "cancel", or the way generation ended). Reported by the worker that ran it,
    which keeps a paused state and frees any other itself."""
    with transaction.atomic():
        # A cancel that a policy pause or the end of generation overtook still wins. Read under
        # the row's lock: a cancel command that saw the session running set its request while
        # holding it; one that comes after this commit finds the session paused or ended, and
        # ends it itself.
        locked(session.pk)
        reason = "cancel" if stop.reason != "cancel" and stop.cancel_waiting() else stop.reason
        if reason == "pause":
            if stop.pause is None:
                raise ValueError("a pause is reported with what the page shows of it")
            record_pause(session, stop.pause, stop.requested_at, stop.halted_at, stop.stamps)
        elif reason == "cancel":
            record_cancelled(session)
        else:
            record_generated(session, reason, stop.cut)
    return reason


def record_cancelled(session: ReviewSession) -> None:
    try:
        pause_flags.clear(session.pk)
    except pause_flags.RedisUnavailable as exc:  # the key expires on its own; the session is over
        log.warning("session %s: could not clear its cancel request: %s", session.pk, exc)
    with transaction.atomic():
        finish(locked(session.pk), S.CANCELLED, by_holder=True)


def record_pause(
    session: ReviewSession,
    pause: events.PauseReport,
    requested_at: float | None,
    halted_at: float | None = None,
    stamps: Mapping[str, float] | None = None,
) -> PauseEvent:
    # The latency a reviewer waits for: their request to the engine's halt (describing the
    # pause, its attention and look-ahead, comes after and is not part of it).
    halted = datetime.fromtimestamp(halted_at, tz=UTC) if halted_at else timezone.now()
    requested = datetime.fromtimestamp(requested_at, tz=UTC) if requested_at else None
    stages = stages_ms(requested_at, {**(stamps or {}), "stored": time.time()})
    with transaction.atomic():
        record = PauseEvent.objects.create(
            session=session,
            position=pause["position"],
            trigger=pause["trigger"],
            kind=pause["kind"],
            reason=pause["reason"],
            evidence=pause["evidence"],
            alternatives=pause["alternatives"],
            attention=pause["attention"],
            requested_at=requested,
            halted_at=halted,
            latency_ms=(halted - requested).total_seconds() * 1000 if requested else None,
        )
        metrics.pause_recorded(record.kind, record.latency_ms)
        paused = {"trigger": record.trigger, "reason": record.reason, "position": record.position}
        told = audit.append("paused", "engine", session, paused)
        set_status(session, S.PAUSED)
        told_page = events.pause(pause, record.pk, record.latency_ms, stages)
        events.emit(session.pk, events.PAUSE, told_page)
    _explain(session, "pause", told, record.position, pause=record)
    return record


def stages_ms(requested_at: float | None, stamps: Mapping[str, float]) -> dict[str, float]:
    """A manual pause's path in ms from its request, stage by stage (the worker's clock and
    the web's are one machine's or NTP's): woke (the flag watcher heard the wake message),
    read (the flag in memory), turn (the serving loop's turn that halted began: the step in
    progress had ended), step (that turn's step began, after the calls and pacing before it),
    honoured (the engine cleared the flag at the token boundary), reported (the relay took
    the stop), stored (the pause's transaction began); and, not stages, step_ms (the serving
    loop's median step time then), previous_turn_ms (how long the turn before the halting
    one took: the request came during it, or earlier) and previous_<part>_ms, that turn's
    calls, slice, pacing and step (inference.serving.TURN_PARTS). Empty for a policy's
    pause."""
    if requested_at is None:
        return {}
    order = ("woke", "read", "turn", "step", "honoured", "reported", "stored")
    stages = {k: round((stamps[k] - requested_at) * 1000, 1) for k in order if stamps.get(k)}
    if stamps.get("step_s"):  # not a stage: the loop's median step then, a halt's yardstick
        stages["step_ms"] = round(stamps["step_s"] * 1000, 1)
    for key, seconds in stamps.items():  # the turn before, and its parts
        if key.startswith("previous_") and key.endswith("_s") and seconds:
            stages[key.removesuffix("_s") + "_ms"] = round(seconds * 1000, 1)
    return stages


def record_generated(
    session: ReviewSession, reason: str, cut: Mapping[str, Any] | None = None
) -> None:
    """The end of generation, and the system's approval where it approves. The audit records
    come last in the transaction: the audit chain's lock is held from the first one to the
    commit, and generations that end together (a worker's sessions) queue for it."""
    with transaction.atomic():
        set_status(session, S.GENERATED)
        events.emit(session.pk, events.FINISH, events.finish(reason, session.text, cut))
        approved = gateway.approves_unpaused(session)
        if approved:
            finish(session, S.COMPLETED, by_holder=True)
        generated = {"reason": reason, "tokens": len(session.generated_ids)}
        audit.append("generated", "engine", session, generated)
        if approved:
            gateway.record_system_approval(session)


# --- edits and views at a pause ----------------------------------------------------------


def pending_edits(session: ReviewSession) -> list[Edit]:
    return list(session.edits.filter(applied=False, error=""))


def record_edit_applied(
    session: ReviewSession, edit_record: Edit, result: events.EditReport
) -> None:
    with transaction.atomic():
        edit_record.applied = True
        edit_record.text_before = result.get("text_before", edit_record.text_before)
        edit_record.text_after = result.get("text_after", edit_record.text_after)
        edit_record.save(update_fields=["applied", "text_before", "text_after"])
        if edit_record.pause is not None:
            _offer_new_alternatives(edit_record, result)
        audit.append(
            f"edit_{edit_record.kind}",
            edit_record.author.username,
            session,
            {**{k: v for k, v in result.items() if k != "attention"}, "edit": edit_record.pk},
        )
        if edit_record.kind == "truncate":
            metrics.rollback("reviewer")
        events.emit(
            session.pk,
            events.edit_kind(edit_record.kind),
            events.edit_applied(result, edit_record.pk, session.text, session.generated_ids),
        )


def _offer_new_alternatives(edit_record: Edit, result: events.EditReport) -> None:
    """The reviewer now faces a new next token: its pause offers that token's alternatives."""
    pause = cast(PauseEvent, edit_record.pause)  # the caller checks it is not None
    pause.alternatives = result.get("alternatives", pause.alternatives)
    edited = "rolled back" if edit_record.kind == "truncate" else "edited"
    pause.outcome = pause.outcome or edited
    pause.save(update_fields=["outcome", "alternatives"])


def record_edit_refused(session: ReviewSession, edit_record: Edit, error: str) -> None:
    """The worker could not apply the edit. ``error`` may be an engine Message: the column
    keeps its English words, the audit and the event its template too (each page translates
    it)."""
    with transaction.atomic():
        edit_record.error = str(error)
        edit_record.save(update_fields=["error"])
        details = {"edit": edit_record.pk, "error": str(error)} | kept(error)
        audit.append("edit_refused", "engine", session, details)
        events.emit(session.pk, events.ERROR, events.error(error, edit_record.pk))


def record_pause_detail(session_id: int, kind: str, detail: Mapping[str, Any]) -> None:
    """A detail of the open pause, read from the frozen state after the pause was reported
    (``events.LOOKAHEAD``, ``PAUSE_ATTENTION``, ``SNAPSHOT``). The pause keeps its attention too:
    the session's API shows it and a layer's view is checked against it. A detail of a pause
    that closed meanwhile (resumed, decided) is dropped: under the session's row lock, so it
    never lands among the next segment's events."""
    assert kind in (events.LOOKAHEAD, events.PAUSE_ATTENTION, events.SNAPSHOT), kind
    with transaction.atomic():
        if S.objects.select_for_update().filter(pk=session_id, status=S.PAUSED).first() is None:
            return
        open_pause = PauseEvent.objects.filter(pk=detail["pause_id"], resumed_at__isnull=True)
        if not open_pause.exists():
            return
        if kind == events.PAUSE_ATTENTION:
            pause = PauseEvent.objects.filter(pk=detail["pause_id"], session_id=session_id)
            pause.update(attention=detail["attention"])
            audit_graph.refresh_pause(session_id, detail["pause_id"])  # its heads' dispersion
        events.emit(session_id, kind, detail)


def record_attention(session: ReviewSession, view: events.Attention) -> None:
    events.emit(session.pk, events.ATTENTION, view)


def record_attention_failed(session_id: int, error: str) -> None:
    events.emit(session_id, events.ERROR, events.error(error))


# --- workers that died -------------------------------------------------------------------


def orphaned_sessions(alive_workers: Container[str]) -> list[tuple[int, str]]:
    """Sessions whose worker is gone with work unfinished, each with the worker it lost: running
    ones, and paused ones with an edit not yet applied (the edit went to the dead worker's own
    queue). Their segment must be started again elsewhere. ``alive_workers`` answers ``in``."""
    # worker "" means queued on the shared queue and not yet claimed: nothing is lost.
    unapplied = Edit.objects.filter(session=OuterRef("pk"), applied=False, error="")
    held = S.objects.alias(has_unapplied=Exists(unapplied)).exclude(worker="")
    held = held.filter(Q(status=S.RUNNING) | Q(status=S.PAUSED, has_unapplied=True))
    rows = held.order_by("pk").values_list("pk", "worker")
    return [(pk, worker) for pk, worker in rows if worker not in alive_workers]


def workers_with_live_sessions() -> set[str]:
    """The workers that unfinished sessions last ran on."""
    held = S.objects.exclude(status__in=S.FINAL).exclude(worker="")
    return set(held.values_list("worker", flat=True).distinct())


def redispatch(session_id: int, lost_worker: str | None = None) -> None:
    """Start the session's segment again on any worker. With ``lost_worker``, only if the
    session is still with it: of two workers that saw the same death, one redispatches."""
    with transaction.atomic():
        session = locked(session_id)
        if session.status not in statuses.LIVE:
            return
        if lost_worker is not None and session.worker != lost_worker:
            return
        audit.append("redispatched", "engine", session, {"lost_worker": session.worker})
        session.worker, session.segment = "", uuid.uuid4().hex
        session.save(update_fields=["worker", "segment", "updated_at"])
        # Sent before the commit, unlike other dispatches: the row lock held here keeps a
        # worker from claiming the segment until then, and a send that fails (broker out of
        # reach) rolls the redispatch back, so the next sweep tries again.
        dispatch.segment((session.pk, session.segment), None)
