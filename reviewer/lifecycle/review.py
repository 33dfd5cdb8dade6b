"""What a reviewer asks of a session: start, pause, resume, edit, choose, attention,
rollback, mute, unmute, approve, reject, cancel. Each validates, writes, audits, then hands work to a
worker after the transaction commits; a refused command changes nothing."""

from __future__ import annotations

from datetime import UTC
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from reviewer import events
from reviewer.analytics import metrics
from reviewer.lifecycle import audit, claims, gateway, inputs, reports, task_types, transitions
from reviewer.lifecycle.idempotency import idempotent
from reviewer.lifecycle.transitions import (
    QUEUE_UNREACHABLE,
    Conflict,
    S,
    close_open_pause,
    command_on,
    finish,
    latest_open_pause,
    live_holder,
    open_pause,
    send_after_commit,
    set_flag,
    set_status,
)
from reviewer.models import Edit, PauseEvent, ReviewSession, statuses
from reviewer.web import arguments
from reviewer.web.arguments import InvalidInput
from reviewer.worker import dispatch, pause_flags

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# What the model reads after a long pause: a short aside in its context, never in the text.
TIME_NOTE = " (Current time: {time}.) "
# A generated text waits for its decision; an edit or a rollback reopens it as a pause at its
# end, where a worker applies it as at any pause. The model writes on only if it is resumed.
EDITABLE = frozenset({S.PAUSED, S.GENERATED})
REOPENED = "Reopened by {user} to correct the generated text"


def summary(session: ReviewSession) -> dict[str, Any]:
    return {"id": session.pk, "status": session.status}


@idempotent("start")
def start_session(
    user: User,
    domain: str,
    input_text: str,
    seed: Any = None,
    max_new_tokens: Any = None,
    decoding: Any = None,
    task_type: Any = None,
) -> dict[str, Any]:
    domain_obj = inputs.domain_named(domain)
    text = inputs.clean_input(input_text)
    task, task_source, labelled_by = inputs.task_type(text, task_type)
    preset = task_types.preset_for(domain_obj, task)
    params = inputs.sampling_params(domain_obj, seed, max_new_tokens, decoding, preset)
    inputs.check_context_fits(domain_obj, text, params.max_new_tokens)
    with transaction.atomic():
        check_generating(user)
        session = S.objects.create(
            owner=user,
            domain=domain_obj,
            input_text=text,
            model_name=settings.MODEL_DIR.name,
            decoding=params.to_dict(),  # seed and max_new_tokens among them
            policy_specs=task_types.policy_specs_for(domain_obj, task),
            pause_budget=domain_obj.pause_budget(),
            task_type=task,
            task_source=task_source,
            task_classifier_version=labelled_by,
        )
        started = {"domain": domain_obj.name, "input": text, "decoding": params.to_dict()}
        started |= {"task_type": task, "task_source": task_source}
        audit.append("start", user.username, session, started)
        transitions.dispatch_segment(session)  # first: see reviewer/lifecycle/transitions.py
        set_status(session, S.RUNNING)
    metrics.generation_started(task)
    return summary(session)


@idempotent("pause")
def pause(user: User, session_id: Any) -> dict[str, Any]:
    with command_on(user, session_id, {S.RUNNING}, "pause", needs_claim=False) as session:
        audit.append("pause_requested", user.username, session)
        # Before the commit: a flag that cannot be set refuses the pause instead of losing it.
        set_flag(pause_flags.request_pause, session.pk)
    return summary(session)


@idempotent("resume")
def resume(user: User, session_id: Any) -> dict[str, Any]:
    """Continue a paused session; or a failed one, from the token ids stored for it (a worker
    rebuilds its state from them), e.g. after an outage longer than the grace."""
    with command_on(user, session_id, statuses.RESUMABLE, "resume", needs_claim=False) as session:
        if session.status != S.FAILED:
            claims.require_claim(session, user, "resume")
        elif session.owner_id is None:  # an ended claim cannot be taken: the retry takes it
            claims.take_to_retry(session, user)
        if session.owner is not None:  # a gateway session counts for its application
            check_generating(session.owner, user)
        paused_s = _paused_for(session)
        close_open_pause(session, outcome="resumed")
        if session.status == S.FAILED:
            audit.append("resume", user.username, session, {"failed_with": session.error})
            session.error, session.error_message, session.finished_at = "", {}, None
            session.save(update_fields=["error", "error_message", "finished_at"])
        else:
            audit.append("resume", user.username, session, {"paused_s": round(paused_s, 1)})
        _tell_the_time_if_late(session, paused_s)
        # A pause request that a policy pause overtook must not stop the resumed run at once.
        set_flag(pause_flags.clear, session.pk)
        transitions.dispatch_segment(session)  # first: see reviewer/lifecycle/transitions.py
        set_status(session, S.RUNNING)
        events.emit(session.pk, events.RESUMED, events.resumed(len(session.generated_ids)))
    return summary(session)


def check_generating(owner: User, actor: User | None = None) -> None:
    """At most CAESURA_REVIEWER_MAX_GENERATING of a reviewer's own sessions generate at once,
    whoever starts or resumes them (staff too), as an application has its own limit; a paused
    session costs no decode time, so it does not count. The owner's row is locked, so two
    starts at once cannot both take the last place."""
    get_user_model().objects.select_for_update().get(pk=owner.pk)
    generating = S.objects.filter(owner=owner, status__in=(S.DRAFT, S.RUNNING)).count()
    limit = settings.CAESURA_REVIEWER_MAX_GENERATING
    if generating >= limit:
        counts = {"generating": generating, "limit": limit, "owner": owner.username}
        if actor is None or actor.pk == owner.pk:
            message = _(
                "%(generating)s of your sessions are generating and %(limit)s may at once:"
                " pause or cancel one, or wait for one to finish"
            )
        else:
            message = _(
                "%(generating)s of %(owner)s's sessions are generating and %(limit)s may at"
                " once: pause or cancel one, or wait for one to finish"
            )
        raise gateway.Throttled(message % counts, retry_after=5)


def _paused_for(session: ReviewSession) -> float:
    """Seconds since the open pause halted (0 without one)."""
    pause = latest_open_pause(session)
    return (timezone.now() - pause.halted_at).total_seconds() if pause is not None else 0.0


def _tell_the_time_if_late(session: ReviewSession, paused_s: float) -> None:
    """After a pause longer than the domain's setting the model's sense of "now" is stale:
    the worker gives it the current time as context (never as text) when it resumes."""
    after = session.domain.resume_time_after_s
    if not after or paused_s <= after:
        return
    now = timezone.now().astimezone(UTC)
    session.pending_note = TIME_NOTE.format(time=now.strftime("%Y-%m-%d %H:%M UTC"))
    session.save(update_fields=["pending_note"])


@idempotent("edit")
def edit(
    user: User,
    session_id: Any,
    start: Any,
    end: Any,
    text: Any,
    glossary_term: Any = None,
    seen_length: int | None = None,
    seen: str | None = None,
) -> dict[str, Any]:
    start, end = arguments.START(start), arguments.END(end)
    text = arguments.EDIT_TEXT(text)
    with command_on(user, session_id, EDITABLE, "edit", edits_applied=True) as session:
        transitions.require_seen(session, seen_length, seen, (start, end))  # a stale page's
        if not 0 <= start <= end <= len(session.text):
            raise InvalidInput(
                _("Edit range %(start)s..%(end)s is outside the text (0..%(length)s)")
                % {"start": start, "end": end, "length": len(session.text)}
            )
        gateway.require_undelivered(session, start, "edit")
        term = inputs.glossary_term(session, glossary_term)
        inputs.check_edit_fits(session, session.text[:start] + text + session.text[end:])
        _reopen_if_generated(session, user)
        record = _queue_edit(
            session,
            user,
            "replace",
            start=start,
            end=end,
            text_before=session.text[start:end],
            text_after=text,
            glossary_term=term,
            glossary_code=term.code if term is not None else None,
        )
    return {**summary(session), "edit": record.pk}


@idempotent("choose")
def choose(
    user: User, session_id: Any, token_id: Any, seen_length: int | None = None
) -> dict[str, Any]:
    token_id = arguments.TOKEN_ID(token_id)
    allowed, command = {S.PAUSED}, "choose an alternative for"
    with command_on(user, session_id, allowed, command, edits_applied=True) as session:
        transitions.require_seen(session, seen_length)
        offered = {alt["token_id"]: alt["text"] for alt in open_pause(session).alternatives}
        if token_id not in offered:
            raise InvalidInput(
                _("Token %(token)s is not among the alternatives offered at this pause")
                % {"token": token_id}
            )
        start = len(session.generated_ids)
        gateway.require_undelivered(session, len(session.text), "choose an alternative for")
        record = _queue_edit(
            session, user, "choose", start=start, token_id=token_id, text_after=offered[token_id]
        )
    return {**summary(session), "edit": record.pk}


@idempotent("attention")
def attention(user: User, session_id: Any, layer: Any) -> dict[str, Any]:
    """Ask for one layer's attention per head at the pause. Reading the frozen state changes
    nothing: a worker answers with an ``attention`` event."""
    layer = arguments.LAYER(layer)
    allowed, command = {S.PAUSED}, "show the attention of"
    with command_on(user, session_id, allowed, command, edits_applied=True) as session:
        layers = len((open_pause(session).attention or {}).get("layers") or [])
        if layers and not 0 <= layer < layers:
            raise InvalidInput(
                _("layer must be in [0, %(layers)s), not %(layer)s")
                % {"layers": layers, "layer": layer}
            )
        holder = live_holder(session.worker)
        args = (session.pk, layer)
        transaction.on_commit(
            lambda: send_after_commit(
                lambda: dispatch.attention(args, holder),
                lambda: reports.record_attention_failed(args[0], QUEUE_UNREACHABLE),
            )
        )
    return summary(session)


@idempotent("rollback")
def rollback(
    user: User, session_id: Any, position: Any, seen_length: int | None = None
) -> dict[str, Any]:
    position = arguments.POSITION(position)
    with command_on(user, session_id, EDITABLE, "roll back", edits_applied=True) as session:
        transitions.require_seen(session, seen_length)
        if not session.generated_ids:
            raise InvalidInput(_("There is nothing to roll back: no token was generated yet"))
        if not 0 <= position < len(session.generated_ids):
            raise InvalidInput(
                _("Position %(position)s is outside the generated tokens (0..%(last)s)")
                % {"position": position, "last": len(session.generated_ids) - 1}
            )
        if session.released_chars:
            gateway.require_undelivered(session, _chars_before(session, position), "roll back")
        end = len(session.generated_ids)
        _reopen_if_generated(session, user)
        record = _queue_edit(session, user, "truncate", start=position, end=end)
    return {**summary(session), "edit": record.pk}


def _chars_before(session: ReviewSession, position: int) -> int:
    """Characters of the text that the generated tokens before ``position`` spell."""
    from reviewer.web.tokenizer import tokenizer  # loads a tokenizer: lazily

    return len(tokenizer().decode(session.generated_ids[:position], skip_special_tokens=True))


@idempotent("mute")
def mute(user: User, session_id: Any, policy: Any) -> dict[str, Any]:
    """Silence one of the session's policies for the rest of the session. Allowed at a pause;
    the worker applies it from the next segment on (resume, or an edit), so a running engine
    never changes under a decision being made."""
    return _set_muted(user, session_id, policy, muted=True)


@idempotent("unmute")
def unmute(user: User, session_id: Any, policy: Any) -> dict[str, Any]:
    """Undo a mute: the policy fires again from the next segment on."""
    return _set_muted(user, session_id, policy, muted=False)


def _set_muted(user: User, session_id: Any, policy: Any, muted: bool) -> dict[str, Any]:
    name = arguments.POLICY(policy)
    command = "mute a policy of" if muted else "unmute a policy of"
    with command_on(user, session_id, {S.PAUSED}, command) as session:
        known = [spec.get("name") for spec in session.policy_specs]
        if name not in known:
            listed = ", ".join(f'"{n}"' for n in known) or _("none")
            raise InvalidInput(
                _('Unknown policy "%(name)s"; this session\'s policies: %(listed)s')
                % {"name": name, "listed": listed}
            )
        current = set(session.muted_policies)
        if muted == (name in current):
            if muted:
                refusal = _('Policy "%(name)s" is already muted in this session')
            else:
                refusal = _('Policy "%(name)s" is not muted in this session')
            raise Conflict(refusal % {"name": name})
        session.muted_policies = sorted(current | {name} if muted else current - {name})
        session.save(update_fields=["muted_policies", "updated_at"])
        action = "mute" if muted else "unmute"
        audit.append(action, user.username, session, {"policy": name})
        events.emit(session.pk, events.MUTED, events.muted(name, muted, session.muted_policies))
    return {**summary(session), "muted_policies": session.muted_policies}


@idempotent("approve")
def approve(user: User, session_id: Any, comment: Any = "") -> dict[str, Any]:
    return _decide(user, session_id, S.COMPLETED, "approve", comment)


@idempotent("reject")
def reject(user: User, session_id: Any, comment: Any = "") -> dict[str, Any]:
    return _decide(user, session_id, S.REJECTED, "reject", comment)


@idempotent("cancel")
def cancel(user: User, session_id: Any) -> dict[str, Any]:
    with command_on(user, session_id, statuses.CANCELLABLE, "cancel") as session:
        audit.append("cancel", user.username, session)
        if session.status == S.RUNNING and live_holder(session.worker):
            # The engine stops at the next token and reports the cancel itself.
            set_flag(pause_flags.request_cancel, session.pk)
        else:
            close_open_pause(session, outcome="cancelled")
            finish(session, S.CANCELLED)
    return summary(session)


def _decide(user: User, session_id: Any, status: str, command: str, comment: str) -> dict[str, Any]:
    comment = arguments.COMMENT(comment)
    with command_on(user, session_id, statuses.DECIDABLE, command, edits_applied=True) as session:
        if status == S.COMPLETED:
            gateway.check_ends_before_its_stop(session)
        close_open_pause(session, outcome=status)
        session.decision_comment, session.decided_by = comment, user.username
        session.save(update_fields=["decision_comment", "decided_by"])
        audit.append(command, user.username, session, {"comment": comment, "text": session.text})
        finish(session, status)
    return summary(session)


def _reopen_if_generated(session: ReviewSession, user: User) -> None:
    """A generated session becomes paused at its end (its row is locked), so that an edit has
    a pause to belong to; the alternatives there come with the edit's report."""
    if session.status != S.GENERATED:
        return
    reason = REOPENED.format(user=user.username)
    pause = PauseEvent.objects.create(
        session=session,
        position=len(session.generated_ids),
        trigger="manual",
        kind=PauseEvent.REOPENED,
        reason=reason,
        halted_at=timezone.now(),
    )
    audit.append("reopen", user.username, session, {"position": pause.position})
    set_status(session, S.PAUSED)
    report = events.reopened_pause(pause.position, reason, session.text)
    events.emit(session.pk, events.PAUSE, events.pause(report, pause.pk, None, {}))


def _queue_edit(session: ReviewSession, user: User, kind: str, **fields: Any) -> Edit:
    record = Edit.objects.create(
        session=session, pause=open_pause(session), kind=kind, author=user, **fields
    )
    audit.append(f"{kind}_requested", user.username, session, record.as_dict())
    # A worker applies it to the frozen state; the session stays paused.
    transitions.dispatch_segment(session)
    return record
