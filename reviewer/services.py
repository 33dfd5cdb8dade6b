"""Every transition of a review session, in one place.

    draft -> running -> paused -> running ... -> generated -> completed | rejected
                  any live state -> cancelled | failed;  failed -> running (resume)

Reviewer commands (start, pause, resume, edit, choose, rollback, approve, reject, cancel)
validate, write, audit, then hand work to a worker after the transaction commits. The
worker reports back through the record_* functions. A refused command changes nothing.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import random
import uuid
from datetime import UTC, datetime

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from inference.config import SamplingConfigError, SamplingParams
from reviewer import arguments, audit, control, events, metrics, task_types
from reviewer.arguments import CommandError, InvalidInput  # errors live with the readers
from reviewer.models import (
    CommandReceipt,
    Domain,
    Edit,
    GlossaryTerm,
    PauseEvent,
    ReviewSession,
)

log = logging.getLogger(__name__)

S = ReviewSession
LIVE = {S.RUNNING, S.PAUSED}
DECIDABLE = {S.PAUSED, S.GENERATED}
RESUMABLE = {S.PAUSED, S.FAILED}  # a failed session resumes from its stored token ids


class SegmentSuperseded(Exception):
    """A newer segment owns the session: the worker running this one must stop writing."""


class NotFound(CommandError):
    status = 404


class Conflict(CommandError):
    """The command is valid but the session's state does not allow it."""

    status = 409


class Unavailable(CommandError):
    """Redis is out of reach: the command was refused and changed nothing; it may be retried."""

    status = 503


# --- lookups -----------------------------------------------------------------------------


def get_session_for(user, session_id) -> ReviewSession:
    try:
        return S.objects.visible_to(user).get(pk=int(session_id))
    except (S.DoesNotExist, TypeError, ValueError):
        raise NotFound(f"Session {session_id} not found") from None


def _locked(session_id: int) -> ReviewSession:
    return S.objects.select_for_update().get(pk=session_id)


def _require(session: ReviewSession, allowed: set[str], command: str) -> None:
    if session.status not in allowed:
        raise Conflict(f"Cannot {command} a session that is {session.status}")


def _require_applied_edits(session: ReviewSession, command: str) -> None:
    """Offsets and alternatives refer to the text as it is now; a queued edit changes it."""
    if session.edits.filter(applied=False, error="").exists():
        raise Conflict(
            f"Cannot {command} while an earlier edit is still being applied; retry shortly"
        )


def idempotent(command: str):
    """Run a command once per client command id; a repeat returns the first result."""

    def wrap(func):
        @functools.wraps(func)
        def run(user, *args, command_id: str | None = None, **kwargs):
            if not command_id:
                return func(user, *args, **kwargs)
            with transaction.atomic():
                _lock_command_id(user.pk, command_id)
                seen = CommandReceipt.objects.filter(user=user, command_id=command_id).first()
                if seen is not None:
                    return {**seen.result, "repeated": True}
                result = func(user, *args, **kwargs)
                try:
                    with transaction.atomic():
                        CommandReceipt.objects.create(
                            user=user,
                            command_id=command_id,
                            command=command,
                            result=result,
                            session_id=result.get("id"),
                        )
                except IntegrityError:  # not expected while the id is locked: refuse, don't 500
                    raise Conflict(f"Command {command_id} is already being handled") from None
                return result

        return run

    return wrap


COMMAND_LOCK_SPACE = 0x0CAE_5C1D  # first key of the two-key advisory locks on command ids


def _lock_command_id(user_id: int, command_id: str) -> None:
    """One request per (user, command id) at a time, until its transaction ends: a repeat
    sent while the first is still running waits, then answers with the first's result."""
    digest = hashlib.sha256(f"{user_id}:{command_id}".encode()).digest()
    key = int.from_bytes(digest[:4], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [COMMAND_LOCK_SPACE, key])


def summary(session: ReviewSession) -> dict:
    return {"id": session.pk, "status": session.status}


# --- reviewer commands ---------------------------------------------------------------------


@idempotent("start")
def start_session(
    user,
    domain: str,
    input_text: str,
    seed=None,
    max_new_tokens=None,
    decoding=None,
    task_type=None,
) -> dict:
    domain_obj = _domain_named(domain)
    text = _clean_input(input_text)
    task, task_source = _task_type(text, task_type)
    preset = task_types.preset_for(domain_obj, task)
    params = _sampling_params(domain_obj, seed, max_new_tokens, decoding, preset)
    _check_context_fits(domain_obj, text, params.max_new_tokens)
    with transaction.atomic():
        session = S.objects.create(
            owner=user,
            domain=domain_obj,
            input_text=text,
            model_name=settings.MODEL_DIR.name,
            decoding=params.to_dict(),
            seed=params.seed,
            max_new_tokens=params.max_new_tokens,
            policy_specs=[p.to_spec() for p in domain_obj.policies.filter(enabled=True)],
            task_type=task,
            task_source=task_source,
        )
        audit.append(
            "start",
            user.username,
            session,
            {
                "domain": domain_obj.name,
                "input": text,
                "decoding": params.to_dict(),
                "task_type": task,
                "task_source": task_source,
            },
        )
        _set_status(session, S.RUNNING)
        _dispatch_segment(session)
    metrics.generation_started(task)
    return summary(session)


@idempotent("pause")
def pause(user, session_id) -> dict:
    with transaction.atomic():
        session = _locked(get_session_for(user, session_id).pk)
        _require(session, {S.RUNNING}, "pause")
        audit.append("pause_requested", user.username, session)
        # Before the commit: a flag that cannot be set refuses the pause instead of losing it.
        _set_flag(control.request_pause, session.pk)
    return summary(session)


@idempotent("resume")
def resume(user, session_id) -> dict:
    """Continue a paused session; or a failed one, from the token ids stored for it (a worker
    rebuilds its state from them), e.g. after an outage longer than the grace."""
    with transaction.atomic():
        session = _locked(get_session_for(user, session_id).pk)
        _require(session, RESUMABLE, "resume")
        _close_open_pause(session, outcome="resumed")
        if session.status == S.FAILED:
            audit.append("resume", user.username, session, {"failed_with": session.error})
            session.error, session.finished_at = "", None
            session.save(update_fields=["error", "finished_at"])
        else:
            audit.append("resume", user.username, session)
        # A pause request that a policy pause overtook must not stop the resumed run at once.
        _set_flag(control.clear, session.pk)
        _set_status(session, S.RUNNING)
        events.emit(session.pk, events.RESUMED, events.resumed(len(session.generated_ids)))
        _dispatch_segment(session)
    return summary(session)


@idempotent("edit")
def edit(user, session_id, start, end, text, glossary_term=None) -> dict:
    start, end = arguments.START(start), arguments.END(end)
    text = arguments.EDIT_TEXT(text)
    with transaction.atomic():
        session = _locked(get_session_for(user, session_id).pk)
        _require(session, {S.PAUSED}, "edit")
        _require_applied_edits(session, "edit")
        if not 0 <= start <= end <= len(session.text):
            raise InvalidInput(
                f"Edit range {start}..{end} is outside the text (0..{len(session.text)})"
            )
        term = _glossary_term(session, glossary_term)
        _check_edit_fits(session, session.text[:start] + text + session.text[end:])
        record = _queue_edit(
            session,
            user,
            "replace",
            start=start,
            end=end,
            text_before=session.text[start:end],
            text_after=text,
            glossary_term=term,
        )
    return {**summary(session), "edit": record.pk}


@idempotent("choose")
def choose(user, session_id, token_id) -> dict:
    token_id = arguments.TOKEN_ID(token_id)
    with transaction.atomic():
        session = _locked(get_session_for(user, session_id).pk)
        _require(session, {S.PAUSED}, "choose an alternative for")
        _require_applied_edits(session, "choose an alternative")
        offered = {alt["token_id"]: alt["text"] for alt in _open_pause(session).alternatives}
        if token_id not in offered:
            raise InvalidInput(
                f"Token {token_id} is not among the alternatives offered at this pause"
            )
        record = _queue_edit(
            session,
            user,
            "choose",
            start=len(session.generated_ids),
            token_id=token_id,
            text_after=offered[token_id],
        )
    return {**summary(session), "edit": record.pk}


@idempotent("attention")
def attention(user, session_id, layer) -> dict:
    """Ask for one layer's attention per head at the pause. Reading the frozen state changes
    nothing: a worker answers with an ``attention`` event."""
    from reviewer import tasks

    layer = arguments.LAYER(layer)
    with transaction.atomic():
        session = _locked(get_session_for(user, session_id).pk)
        _require(session, {S.PAUSED}, "show the attention of")
        _require_applied_edits(session, "show the attention")
        layers = len((_open_pause(session).attention or {}).get("layers") or [])
        if layers and not 0 <= layer < layers:
            raise InvalidInput(f"layer must be in [0, {layers}), not {layer}")
        holder = _live_holder(session.worker)
        args = (session.pk, layer)
        transaction.on_commit(
            lambda: _send_after_commit(
                lambda: tasks.dispatch_attention(args, holder),
                lambda: record_attention_failed(args[0], QUEUE_UNREACHABLE),
            )
        )
    return summary(session)


@idempotent("rollback")
def rollback(user, session_id, position) -> dict:
    position = arguments.POSITION(position)
    with transaction.atomic():
        session = _locked(get_session_for(user, session_id).pk)
        _require(session, {S.PAUSED}, "roll back")
        _require_applied_edits(session, "roll back")
        if not 0 <= position < len(session.generated_ids):
            raise InvalidInput(
                f"Position {position} is outside the generated tokens (0..{len(session.generated_ids) - 1})"
            )
        record = _queue_edit(
            session, user, "truncate", start=position, end=len(session.generated_ids)
        )
    return {**summary(session), "edit": record.pk}


@idempotent("approve")
def approve(user, session_id, comment: str = "") -> dict:
    return _decide(user, session_id, S.COMPLETED, "approve", comment)


@idempotent("reject")
def reject(user, session_id, comment: str = "") -> dict:
    return _decide(user, session_id, S.REJECTED, "reject", comment)


@idempotent("cancel")
def cancel(user, session_id) -> dict:
    with transaction.atomic():
        session = _locked(get_session_for(user, session_id).pk)
        _require(session, {S.DRAFT, *LIVE, S.GENERATED}, "cancel")
        audit.append("cancel", user.username, session)
        if session.status == S.RUNNING and _live_holder(session.worker):
            # The engine stops at the next token and reports the cancel itself.
            _set_flag(control.request_cancel, session.pk)
        else:
            _close_open_pause(session, outcome="cancelled")
            _finish(session, S.CANCELLED)
    return summary(session)


def _decide(user, session_id, status: str, command: str, comment: str) -> dict:
    comment = arguments.COMMENT(comment)
    with transaction.atomic():
        session = _locked(get_session_for(user, session_id).pk)
        _require(session, DECIDABLE, command)
        _require_applied_edits(session, command)
        _close_open_pause(session, outcome=status)
        session.decision_comment = comment
        session.save(update_fields=["decision_comment"])
        audit.append(command, user.username, session, {"comment": comment, "text": session.text})
        _finish(session, status)
    return summary(session)


# --- worker reports ----------------------------------------------------------------------


def begin_segment(session_id: int, segment: str, worker: str) -> ReviewSession | None:
    """Claim a segment for this worker; None when the segment is stale or the session is done."""
    with transaction.atomic():
        session = S.objects.select_for_update().filter(pk=session_id).first()
        if session is None or session.segment != segment or session.is_final:
            return None
        session.worker = worker
        session.save(update_fields=["worker", "updated_at"])
        return session


def record_prompt(session: ReviewSession, prompt_ids: list[int]) -> None:
    session.prompt_ids = prompt_ids
    session.save(update_fields=["prompt_ids", "updated_at"])


def record_token(session: ReviewSession, token: events.Token) -> None:
    events.emit(session.pk, events.TOKEN, token)


def checkpoint(session: ReviewSession, generated_ids: list[int], text: str, meta: dict) -> None:
    """Persist the token ids so far; events after ids_seq hold what came since.

    Only the segment that owns the session may write: a superseded one is told to stop."""
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


def record_pause(
    session: ReviewSession, pause: events.PauseReport, requested_at: float | None
) -> PauseEvent:
    halted = timezone.now()
    requested = datetime.fromtimestamp(requested_at, tz=UTC) if requested_at else None
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
        audit.append(
            "paused",
            "engine",
            session,
            {"trigger": record.trigger, "reason": record.reason, "position": record.position},
        )
        _set_status(session, S.PAUSED)
        events.emit(session.pk, events.PAUSE, events.pause(pause, record.pk, record.latency_ms))
    return record


def record_flag(session: ReviewSession, flag: events.Flag) -> None:
    audit.append("flagged", "engine", session, flag)
    events.emit(session.pk, events.FLAG, flag)


def record_rollback(session: ReviewSession, rollback: events.Rollback) -> None:
    metrics.rollback("engine")
    # The audit record keeps the engine event's own name in it, as it always has.
    audit.append("rolled_back", "engine", session, {"type": "rollback", **rollback})
    events.emit(session.pk, events.ROLLBACK, rollback)


def record_generated(session: ReviewSession, reason: str) -> None:
    with transaction.atomic():
        audit.append(
            "generated", "engine", session, {"reason": reason, "tokens": len(session.generated_ids)}
        )
        _set_status(session, S.GENERATED)
        events.emit(session.pk, events.FINISH, events.finish(reason, session.text))


def record_cancelled(session: ReviewSession) -> None:
    with transaction.atomic():
        _finish(_locked(session.pk), S.CANCELLED)


def record_failure(session_id: int, error: str, segment: str | None = None) -> None:
    """The session failed; unless ``segment`` names a segment already superseded (a worker
    cut off from Postgres, whose session another worker took over meanwhile)."""
    with transaction.atomic():
        session = S.objects.select_for_update().filter(pk=session_id).first()
        if session is None or session.is_final:
            return
        if segment is not None and session.segment != segment:
            return
        session.error = error
        session.save(update_fields=["error"])
        audit.append("failed", "engine", session, {"error": error})
        _finish(session, S.FAILED)
        events.emit(session.pk, events.ERROR, events.error(error))


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
        pause = edit_record.pause
        if pause is not None:
            # The reviewer now faces a new next token: offer its alternatives.
            pause.alternatives = result.get("alternatives", pause.alternatives)
            pause.outcome = pause.outcome or (
                "rolled back" if edit_record.kind == "truncate" else "edited"
            )
            pause.save(update_fields=["outcome", "alternatives"])
        audit.append(
            f"edit_{edit_record.kind}",
            edit_record.author.username,
            session,
            {**result, "edit": edit_record.pk},
        )
        if edit_record.kind == "truncate":
            metrics.rollback("reviewer")
        events.emit(
            session.pk,
            events.edit_kind(edit_record.kind),
            events.edit_applied(result, edit_record.pk, session.text, session.generated_ids),
        )


def record_attention(session: ReviewSession, view: events.Attention) -> None:
    events.emit(session.pk, events.ATTENTION, view)


def record_attention_failed(session_id: int, error: str) -> None:
    events.emit(session_id, events.ERROR, events.error(error))


def record_edit_refused(session: ReviewSession, edit_record: Edit, error: str) -> None:
    with transaction.atomic():
        edit_record.error = error
        edit_record.save(update_fields=["error"])
        audit.append("edit_refused", "engine", session, {"edit": edit_record.pk, "error": error})
        events.emit(session.pk, events.ERROR, events.error(error, edit_record.pk))


def orphaned_sessions(alive_workers) -> list[tuple[int, str]]:
    """Sessions whose worker is gone with work unfinished, each with the worker it lost: running
    ones, and paused ones with an edit not yet applied (the edit went to the dead worker's own
    queue). Their segment must be started again elsewhere. ``alive_workers`` answers ``in``."""
    # worker "" means queued on the shared queue and not yet claimed: nothing is lost.
    unapplied = Edit.objects.filter(session=OuterRef("pk"), applied=False, error="")
    held = S.objects.alias(has_unapplied=Exists(unapplied)).exclude(worker="")
    held = held.filter(Q(status=S.RUNNING) | Q(status=S.PAUSED, has_unapplied=True))
    rows = held.order_by("pk").values_list("pk", "worker")
    return [(pk, worker) for pk, worker in rows if worker not in alive_workers]


def redispatch(session_id: int, lost_worker: str | None = None) -> None:
    """Start the session's segment again on any worker. With ``lost_worker``, only if the
    session is still with it: of two workers that saw the same death, one redispatches."""
    with transaction.atomic():
        session = _locked(session_id)
        if session.status not in LIVE:
            return
        if lost_worker is not None and session.worker != lost_worker:
            return
        from reviewer import tasks

        audit.append("redispatched", "engine", session, {"lost_worker": session.worker})
        session.worker, session.segment = "", uuid.uuid4().hex
        session.save(update_fields=["worker", "segment", "updated_at"])
        # Sent before the commit, unlike other dispatches: the row lock held here keeps a
        # worker from claiming the segment until then, and a send that fails (broker out of
        # reach) rolls the redispatch back, so the next sweep tries again.
        tasks.dispatch_segment((session.pk, session.segment), None)


# --- helpers -----------------------------------------------------------------------------


def _set_status(session: ReviewSession, status: str) -> None:
    session.status = status
    session.save(update_fields=["status", "updated_at"])
    events.emit(session.pk, events.STATUS, events.status(status))


def _finish(session: ReviewSession, status: str) -> None:
    session.finished_at = timezone.now()
    session.save(update_fields=["finished_at"])
    _set_status(session, status)
    session_id, holder = session.pk, session.worker
    transaction.on_commit(lambda: _release_state(session_id, holder))


def _release_state(session_id: int, holder: str) -> None:
    """Free what a finished session held: its control key, its vault snapshot and the
    paused state in the memory of the worker that ran it."""
    from reviewer import tasks
    from reviewer.worker import vault

    vault().discard(session_id)
    try:
        control.clear(session_id)
        if queue := _live_holder(holder):
            tasks.dispatch_release(session_id, queue)
    except Exception as exc:  # Redis out of reach: the key expires, the memory is freed later
        log.warning("session %s: could not release its state: %s", session_id, exc)


def _live_holder(worker: str) -> str | None:
    """The Celery hostname (own queue) of the worker that ran a session, if that process is
    still alive (it may hold the state); None for a dead or a previous incarnation."""
    from reviewer import liveness

    return liveness.hostname_of(worker) if worker and liveness.is_alive(worker) else None


def _dispatch_segment(session: ReviewSession) -> None:
    """Hand the session to a worker after commit: the one holding its state if it is alive."""
    from reviewer import tasks

    session.segment = uuid.uuid4().hex
    session.save(update_fields=["segment", "updated_at"])
    holder = _live_holder(session.worker)
    args = (session.pk, session.segment)
    transaction.on_commit(
        lambda: _send_after_commit(
            lambda: tasks.dispatch_segment(args, holder),
            lambda: record_failure(args[0], QUEUE_UNREACHABLE, args[1]),
        )
    )


QUEUE_UNREACHABLE = "The task queue (Redis) stayed out of reach, so no worker got the session; resume it to try again"


def _send_after_commit(send, on_failure) -> None:
    """Hand work to the broker once the command is committed. The send retries through a
    blip (tasks._send); should the broker stay away longer, the session says so instead of
    waiting for a task that was never queued."""
    try:
        send()
    except Exception:
        log.exception("could not send a task to the broker")
        on_failure()


def _set_flag(action, session_id: int) -> None:
    try:
        action(session_id)
    except control.RedisUnavailable as exc:
        raise Unavailable(f"{exc}: nothing was changed; try again in a moment") from None


def _queue_edit(session: ReviewSession, user, kind: str, **fields) -> Edit:
    record = Edit.objects.create(
        session=session, pause=_open_pause(session), kind=kind, author=user, **fields
    )
    audit.append(
        f"{kind}_requested", user.username, session, {**_edit_fields(record), "edit": record.pk}
    )
    _dispatch_segment(session)  # a worker applies it to the frozen state; the session stays paused
    return record


def _edit_fields(record: Edit) -> dict:
    return {
        "start": record.start,
        "end": record.end,
        "token_id": record.token_id,
        "text": record.text_after,
        "glossary_term": record.glossary_term_id,
    }


def _latest_open_pause(session: ReviewSession) -> PauseEvent | None:
    return session.pauses.filter(resumed_at__isnull=True).order_by("-halted_at").first()


def _open_pause(session: ReviewSession) -> PauseEvent:
    pause = _latest_open_pause(session)
    if pause is None:
        raise Conflict("The session has no open pause")
    return pause


def _close_open_pause(session: ReviewSession, outcome: str) -> None:
    pause = _latest_open_pause(session)
    if pause is not None:
        pause.resumed_at = timezone.now()
        pause.outcome = pause.outcome or outcome
        pause.save(update_fields=["resumed_at", "outcome"])


def _domain_named(name) -> Domain:
    if name is None:
        raise InvalidInput("domain is required")
    name = arguments.DOMAIN(name)
    domain = Domain.objects.filter(name=name).first() or Domain.objects.filter(slug=name).first()
    if domain is None:
        known = ", ".join(Domain.objects.values_list("name", flat=True))
        raise InvalidInput(f"Unknown domain {name!r}; known domains: {known}")
    return domain


def _clean_input(text) -> str:
    if text is None:
        raise InvalidInput("input is required")
    return arguments.INPUT(text)


def _task_type(text: str, override) -> tuple[str, str]:
    if override not in (None, ""):
        override = arguments.TASK_TYPE(override)
    try:
        return task_types.choose(text, override)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def _sampling_params(
    domain: Domain, seed, max_new_tokens, decoding, preset: dict | None = None
) -> SamplingParams:
    """The domain's defaults, then the task type's preset, then what the request asked for."""
    if decoding is not None and not isinstance(decoding, dict):
        raise InvalidInput("decoding must be an object")
    values = {**domain.decoding, **(preset or {}), **(decoding or {})}
    values["seed"] = arguments.SEED(seed) if seed is not None else random.randrange(2**31)
    limit = max_new_tokens if max_new_tokens is not None else values.get("max_new_tokens")
    values["max_new_tokens"] = (
        arguments.MAX_NEW_TOKENS(limit) if limit is not None else settings.CAESURA_MAX_NEW_TOKENS
    )
    try:
        return SamplingParams.from_dict(values)
    except (SamplingConfigError, TypeError) as exc:
        raise InvalidInput(f"Bad decoding parameters: {exc}") from None


def _check_context_fits(domain: Domain, text: str, max_new_tokens: int) -> None:
    from reviewer.tokens import context_length, prompt_length

    needed = prompt_length(domain.system_prompt, text) + max_new_tokens
    limit = context_length()
    if needed > limit:
        raise InvalidInput(
            f"Input too long: prompt plus max_new_tokens is {needed} tokens, the model's context is {limit}"
        )


def _check_edit_fits(session: ReviewSession, edited_text: str) -> None:
    """The edited text is prefilled after the prompt, and generation continues up to
    max_new_tokens in all: both must still fit the model's context."""
    from reviewer.tokens import context_length, prompt_length, text_length

    prompt = len(session.prompt_ids) or prompt_length(
        session.domain.system_prompt, session.input_text
    )
    generated = text_length(edited_text)
    to_come = max(session.max_new_tokens - generated, 0)
    needed, limit = prompt + generated + to_come, context_length()
    if needed > limit:
        raise InvalidInput(
            f"Edit too long: prompt ({prompt} tokens) plus the edited text ({generated}) and the"
            f" rest of max_new_tokens ({to_come}) is {needed} tokens, the model's context is {limit}"
        )


def _glossary_term(session: ReviewSession, term_id) -> GlossaryTerm | None:
    if term_id is None:
        return None
    term = GlossaryTerm.objects.filter(
        pk=arguments.GLOSSARY_TERM(term_id), glossary__domain=session.domain
    ).first()
    if term is None:
        raise InvalidInput(f"Glossary term {term_id} is not in the {session.domain} glossary")
    return term
