"""What an application asks through the review gateway (/v1/): start a generation, cancel
it; and what follows for its sessions: the text already delivered is locked against edits,
and a generation no policy paused is approved by the system where its domain says so.

An application is audited by its ``actor`` name; the system's own decisions as ``system``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists
from django.utils import timezone
from django.utils.translation import gettext as _

from inference.text import stop_string_at
from reviewer import events
from reviewer.analytics import metrics
from reviewer.lifecycle import audit, inputs, task_types, transitions
from reviewer.lifecycle.transitions import Conflict, NotFound, S, close_open_pause, finish
from reviewer.models import Application, Domain, ReviewSession, SessionEvent, statuses
from reviewer.web.arguments import CommandError, InvalidInput
from reviewer.worker import pause_flags

SYSTEM_ACTOR = "system"
# How long after it started an unanswered generation can be joined by a client's automatic
# retry: longer than a client waits before it gives up on a call (the openai SDK: 10 minutes).
RETRY_JOIN_S = 3600


@dataclass(frozen=True)
class Replay:
    """What tells a repeated call from a new one: the digest of its endpoint and body, the
    Idempotency-Key it sent, and whether the client says it retries a call (the openai SDK's
    ``x-stainless-retry-count``)."""

    digest: str
    key: str | None = None
    retried: bool = False


class ContextExceeded(InvalidInput):
    """The prompt plus the tokens asked for do not fit the model's context; OpenAI's code,
    which clients (LangChain) recognise."""

    code, param = "context_length_exceeded", "max_tokens"


class MessagesRefused(InvalidInput):
    """The model's chat template refuses the conversation (the call names ``messages``)."""

    code, param = "invalid_value", "messages"


class Throttled(CommandError):
    """Over a limit (an application's, or a reviewer's generations at once): refused, nothing
    changed; retry after a while."""

    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def domains_of(application: Application) -> list[Domain]:
    return list(application.domains.order_by("slug"))


def session_of(application: Application, session_id: Any) -> ReviewSession:
    """One of the application's own generations; another's is not found, as an unknown one."""
    try:
        return S.objects.of_application(application).get(pk=int(session_id))
    except (S.DoesNotExist, TypeError, ValueError):
        raise NotFound(f"No response or completion with id {session_id!r}") from None


def generation_to_join(application: Application, replay: Replay) -> ReviewSession | None:
    """The generation a repeated call follows instead of starting another: the one started
    with its Idempotency-Key, or, for a client's automatic retry, the newest one started with
    the same body whose call got no answer (a timed-out call's retry must not put a second
    copy in front of the reviewers). A key reused with another body is refused."""
    mine = S.objects.of_application(application).select_related("domain")  # read off the loop
    if replay.key is not None:
        found = mine.filter(idempotency_key=replay.key).first()
        if found is not None and found.request_digest != replay.digest:
            raise Conflict(
                f"The Idempotency-Key {replay.key!r} was used for another request (generation"
                f" {found.pk}); send a new key with a new request"
            )
        return found
    if not replay.retried:
        return None
    since = timezone.now() - timedelta(seconds=RETRY_JOIN_S)
    unanswered = mine.filter(
        request_digest=replay.digest, answered_at__isnull=True, created_at__gte=since
    )
    return unanswered.exclude(status=S.FAILED).order_by("-created_at").first()


def start_or_join(
    application: Application, replay: Replay, start: Callable[[], ReviewSession]
) -> ReviewSession:
    """The generation a call follows: the one it repeats, else the one ``start`` makes."""
    joined = generation_to_join(application, replay)
    if joined is not None:
        return joined
    try:
        return start()
    except (IntegrityError, Throttled):
        # A call with the same key started it a moment ago: its row broke the key's unique
        # constraint, or, at the application's limit, it took the last place while this one
        # waited for the application's lock.
        joined = generation_to_join(application, replay)
        if joined is None:
            raise
        return joined


def check_ends_before_its_stop(session: ReviewSession) -> None:
    """An application's answer never holds one of its stop strings. A pause can come on the
    token that completes one (a policy fired on it), or a reviewer may write one: approving
    that text would send it. Resuming ends the run there, the stop string cut off."""
    stops = [str(s) for s in (session.gateway or {}).get("stop") or ()]
    at = stop_string_at(session.text, stops) if stops else None
    if at is None:
        return
    found = next(s for s in stops if s and session.text.startswith(s, at))
    raise Conflict(
        _(
            "The text holds “%(stop)s”, where the application asked its answer to end: resume,"
            " and the generation ends there with it cut off, or edit it out, then approve"
        )
        % {"stop": found}
    )


def mark_answered(session_id: int) -> None:
    """The call that started the generation got its whole answer: a retry starts anew."""
    S.objects.filter(pk=session_id, answered_at__isnull=True).update(answered_at=timezone.now())


def start_generation(
    application: Application,
    domain: Domain,
    input_text: str,
    prompt: Sequence[Mapping[str, str]] | Sequence[int],
    decoding: Mapping[str, Any],
    request: Mapping[str, Any],
    replay: Replay | None = None,
) -> ReviewSession:
    """A new ownerless session in ``domain`` for ``application``: it waits in the domain's
    queue whenever it pauses. ``prompt`` is the chat messages (or token ids) the worker
    encodes; ``input_text`` is what reviewers read as the case; ``request`` is kept as the
    session's ``gateway`` record (endpoint, stop strings, logprobs, ...)."""
    task, task_source, labelled_by = inputs.task_type(input_text, None)
    preset = task_types.preset_for(domain, task)
    params = inputs.sampling_params(
        domain, decoding.get("seed"), decoding.get("max_new_tokens"), _sampling(decoding), preset
    )
    _check_prompt_fits(domain, prompt, params.max_new_tokens, _limit_param(request))
    with transaction.atomic():
        _check_concurrency(application)
        prompt_key = "prompt_ids" if prompt and isinstance(prompt[0], int) else "messages"
        session = S.objects.create(
            application=application,
            domain=domain,
            input_text=input_text,
            model_name=settings.MODEL_DIR.name,
            decoding=params.to_dict(),
            policy_specs=task_types.policy_specs_for(domain, task),
            pause_budget=domain.pause_budget(),
            task_type=task,
            task_source=task_source,
            task_classifier_version=labelled_by,
            gateway={**request, prompt_key: list(prompt)},
            request_digest=replay.digest if replay else "",
            idempotency_key=replay.key if replay else None,
        )
        started: dict[str, Any] = {
            "domain": domain.name,
            "input": input_text,
            "decoding": params.to_dict(),
        }
        started |= {"endpoint": request.get("endpoint"), "user": request.get("user")}
        transitions.dispatch_segment(session)  # first: see reviewer/lifecycle/transitions.py
        transitions.set_status(session, S.RUNNING)
        # Last: the audit chain's lock is held from here to the commit, so calls arriving
        # together wait on each other for the record alone.
        audit.append("start", application.actor, session, started)
    metrics.generation_started(task)
    return session


def _limit_param(request: Mapping[str, Any]) -> str:
    """The parameter a refusal for too long a prompt names: the token limit as the call named
    it; where the call left it to the domain, the prompt itself."""
    if request.get("limit_name"):
        return str(request["limit_name"])
    return "input" if request.get("endpoint") == "response" else "messages"


def _sampling(decoding: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in decoding.items() if k not in ("seed", "max_new_tokens")}


def _check_prompt_fits(
    domain: Domain,
    prompt: Sequence[Mapping[str, str]] | Sequence[int],
    max_new_tokens: int,
    limit: str = "max_tokens",
) -> None:
    """``limit``: the parameter a refusal names (the call's name for its token limit, or the
    prompt's where the domain's limit applies)."""
    from inference.prompt import PromptRefused, encode_prompt
    from reviewer.web.tokenizer import context_length, tokenizer

    system = domain.system_prompt or None
    try:
        needed = len(encode_prompt(tokenizer(), prompt, system=system)) + max_new_tokens
    except PromptRefused as exc:
        raise MessagesRefused(str(exc)) from None
    except ValueError as exc:  # markup the engine reads in messages, badly formed
        raise MessagesRefused(
            f"messages: {exc}. Caesura reads <ANCHOR:NAME>...</ANCHOR> and <RECALL> in a"
            " message as attention markup (docs/gateway.md)"
        ) from None
    if needed > context_length():
        asked = (
            limit if limit.startswith("max_") else f"the domain's token limit ({max_new_tokens})"
        )
        exceeded = ContextExceeded(
            f"The prompt plus {asked} is {needed} tokens; the model's context is {context_length()}"
        )
        exceeded.param = limit
        raise exceeded


def _check_concurrency(application: Application) -> None:
    """At most ``max_concurrent`` generations not yet ended; the application's row is locked
    so two requests at once cannot both take the last place."""
    Application.objects.select_for_update().get(pk=application.pk)
    live = S.objects.of_application(application).exclude(status__in=S.FINAL).count()
    if live >= application.max_concurrent:
        raise Throttled(
            f"{live} generations of this application have not ended; its limit is"
            f" {application.max_concurrent} at once",
            retry_after=5,
        )


def cancel(application: Application, session_id: Any) -> ReviewSession:
    """The application no longer wants the generation: it stops where it is."""
    with transaction.atomic():
        session = transitions.locked(session_of(application, session_id).pk)
        transitions.require(session, statuses.CANCELLABLE, "cancel")
        audit.append("cancel", application.actor, session)
        if session.status == S.RUNNING and transitions.live_holder(session.worker):
            transitions.set_flag(pause_flags.request_cancel, session.pk)
        else:
            close_open_pause(session, outcome="cancelled")
            finish(session, S.CANCELLED)
    return session


# --- what follows for a gateway session ------------------------------------------------


def approves_unpaused(session: ReviewSession) -> bool:
    """Whether a gateway generation that finished generating is approved by the system: its
    domain allows it and no policy (nor reviewer) paused it; else it waits for a reviewer."""
    if not session.from_gateway or not session.domain.auto_approve_unpaused:
        return False
    return not session.pauses.exists()


def record_system_approval(session: ReviewSession) -> None:
    """The system's approval of a generation ``approves_unpaused`` let through, on the audit
    chain (its status changed already: no pause means no audit graph to complete)."""
    audit.append("approve", SYSTEM_ACTOR, session, {"comment": "", "text": session.text})


# What a stream must have read before it may lock more text: a pause, an edit or a resume
# since then may have changed the text it is about to send.
CHANGES = (events.PAUSE, events.STATUS, events.EDITED, events.TRUNCATED, events.ROLLBACK,
           events.RESUMED)  # fmt: skip


def release(session_id: int, chars: int, read_upto: int) -> bool:
    """Delayed delivery is about to send the text up to ``chars``, as the stream read it from
    the session's events up to ``read_upto``: lock it, so that no reviewer changes it from
    now on (it only ever moves forward). Only while the session runs and nothing that may
    change its text (CHANGES) was stored since: else (a pause stored after the token that
    released the text; a pause, an edit and a resume since) it must not leave, and False
    says so. Text locked already (by another stream of the session) may always leave."""
    changed = SessionEvent.objects.filter(
        session_id=session_id, seq__gt=read_upto, type__in=CHANGES
    )
    running = S.objects.filter(pk=session_id, status=S.RUNNING, released_chars__lt=chars)
    if running.filter(~Exists(changed)).update(released_chars=chars):
        return True
    return S.objects.filter(pk=session_id, released_chars__gte=chars).exists()


def require_undelivered(session: ReviewSession, start: int, command: str) -> None:
    """An edit, choice or rollback may change only text not yet released to the application."""
    if start < session.released_chars:
        raise Conflict(
            _(
                "Cannot %(command)s the session there: its first %(released)s characters were"
                " already released to the application (delayed delivery) and are locked;"
                " change only text after character %(released)s"
            )
            % {"command": transitions.named(command), "released": session.released_chars}
        )
