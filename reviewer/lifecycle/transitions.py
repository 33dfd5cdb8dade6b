"""What every transition shares: the states, the errors a refused command raises, the locked
read of a session, and the hand-over of work to a worker once the transaction commits."""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import pgettext, pgettext_lazy

from inference.message import Message
from reviewer import events
from reviewer.events import queue
from reviewer.lifecycle import audit, audit_graph
from reviewer.models import PauseEvent, ReviewSession, statuses
from reviewer.web.arguments import CommandError
from reviewer.web.ui_text import error_text
from reviewer.worker import dispatch, liveness, pause_flags, vault

if TYPE_CHECKING:
    from django.contrib.auth.models import User

log = logging.getLogger(__name__)

S = ReviewSession
# The statuses that end the story of a session's open audit graphs: it runs again, or it was
# decided (a failure keeps its own open: a reviewer may still resume it).
STORY_ENDS = {S.RUNNING, S.COMPLETED, S.REJECTED, S.CANCELLED}

QUEUE_UNREACHABLE = "The task queue (Redis) stayed out of reach, so no worker got the session; resume it to try again"


# What a refused command is called in its message (the command table's commands and the
# claims'), translated where the message is made: "Cannot %(command)s a session that is ...".
COMMAND_PHRASES = (
    pgettext_lazy("command", "pause"),
    pgettext_lazy("command", "resume"),
    pgettext_lazy("command", "edit"),
    pgettext_lazy("command", "choose an alternative for"),
    pgettext_lazy("command", "show the attention of"),
    pgettext_lazy("command", "roll back"),
    pgettext_lazy("command", "mute a policy of"),
    pgettext_lazy("command", "unmute a policy of"),
    pgettext_lazy("command", "cancel"),
    pgettext_lazy("command", "approve"),
    pgettext_lazy("command", "reject"),
    pgettext_lazy("command", "correct the task type of"),
    pgettext_lazy("command", "claim"),
    pgettext_lazy("command", "release"),
    pgettext_lazy("command", "reassign"),
)


def named(command: str) -> str:
    """A command as a message in the active language names it."""
    return pgettext("command", command)


def status_named(status: str) -> str:
    """A status as a message in the active language names it (its code, in English)."""
    return _(status)


class SegmentSuperseded(Exception):
    """A newer segment owns the session: the worker running this one must stop writing."""


class NotFound(CommandError):
    status = 404


class Conflict(CommandError):
    """The command is valid but the session's state does not allow it."""

    status = 409


class EditPending(Conflict):
    """An edit on its way to the worker changes the text the command refers to: the same
    command goes through once it is applied (the session page waits for it, and retries)."""

    code = "edit_pending"


class TextChanged(Conflict):
    """The command was made on another text than the session's (an edit from another tab
    landed, or tokens came that the client had not seen): its offsets would act elsewhere."""

    code = "text_changed"


class Unavailable(CommandError):
    """Redis is out of reach: the command was refused and changed nothing; it may be retried."""

    status = 503


# --- reading a session -------------------------------------------------------------------


def get_session_for(user: User, session_id: Any) -> ReviewSession:
    try:
        return S.objects.visible_to(user).get(pk=int(session_id))
    except (S.DoesNotExist, TypeError, ValueError):
        raise NotFound(_("Session %(id)s not found") % {"id": session_id}) from None


def locked(session_id: int) -> ReviewSession:
    return S.objects.select_for_update().get(pk=session_id)


@contextlib.contextmanager
def command_on(
    user: User,
    session_id: Any,
    allowed: AbstractSet[str],
    command: str,
    edits_applied: bool = False,
    needs_claim: bool = True,
) -> Iterator[ReviewSession]:
    """The opening every reviewer command shares: one transaction, the session locked, its
    state checked (and, where offsets matter, no edit still on its way to the worker). A
    gateway session is driven by the reviewer holding its claim, whose command renews it."""
    from reviewer.lifecycle import claims  # claims reads sessions through this module

    with transaction.atomic():
        session = locked(get_session_for(user, session_id).pk)
        require(session, allowed, command)
        if needs_claim:
            claims.require_claim(session, user, command)
        if edits_applied:
            require_applied_edits(session, command)
        claims.renew(session, user)
        yield session


def require(session: ReviewSession, allowed: AbstractSet[str], command: str) -> None:
    if session.status not in allowed:
        raise Conflict(
            _("Cannot %(command)s a session that is %(status)s")
            % {"command": named(command), "status": status_named(session.status)}
        )


def require_applied_edits(session: ReviewSession, command: str) -> None:
    """Offsets and alternatives refer to the text as it is now; a queued edit changes it."""
    if session.edits.filter(applied=False, error="").exists():
        raise EditPending(
            _(
                "Cannot %(command)s the session while an earlier edit is still being applied;"
                " retry shortly"
            )
            % {"command": named(command)}
        )


def require_seen(
    session: ReviewSession,
    seen_length: int | None,
    seen: str | None = None,
    span: tuple[int, int] = (0, 0),
) -> None:
    """A command that says which text it was made on (its length and, for an edit, the
    span's words) acts on that text or not at all: a page that queued it offline may not have
    heard of another tab's edit yet, and its offsets would land on other words."""
    text = session.text
    same_length = seen_length is None or len(text) == seen_length
    inside = 0 <= span[0] <= span[1] <= len(text)  # else the range is refused as such (400)
    if same_length and (seen is None or not inside or text[span[0] : span[1]] == seen):
        return
    raise TextChanged(
        _(
            "The text changed since this command was made (another reviewer's edit, or tokens"
            " not shown yet); nothing was changed: look at the text again and redo it"
        )
    )


# --- changing its state ------------------------------------------------------------------


def set_status(session: ReviewSession, status: str, also: tuple[str, ...] = ()) -> None:
    """The one place a status changes; a transition the lifecycle table does not list is
    refused (a bug in the caller, not a reviewer's mistake). The stored status is the one
    checked: the caller's copy may predate a command another process ran. ``also``: fields
    the caller set that go in the same statement."""
    current = S.objects.values_list("status", flat=True).get(pk=session.pk)
    if current != status and not statuses.allows(current, status):
        raise Conflict(
            _("A session that is %(current)s cannot become %(status)s")
            % {"current": status_named(current), "status": status_named(status)}
        )
    session.status = status
    session.waiting_since = waiting_since(session, current, status)
    session.save(update_fields=["status", "waiting_since", "updated_at", *also])
    # A resume or a decision: the reviewer's part is on record (a new session has no story yet)
    if status in STORY_ENDS and current != S.DRAFT:
        audit_graph.complete_open(session)
    events.emit(session.pk, events.STATUS, events.status(status))
    queue.announce(session, "status")


def waiting_since(session: ReviewSession, current: str, status: str) -> datetime | None:
    """Since when the session has waited for a reviewer: from the moment it paused or finished
    generating, kept while it goes from paused to generated, cleared when it runs or ends."""
    if status not in statuses.WAITING:
        return None
    if current in statuses.WAITING and session.waiting_since is not None:
        return session.waiting_since
    return timezone.now()


def finish(session: ReviewSession, status: str, by_holder: bool = False) -> None:
    """The session ends. ``by_holder``: the worker that ran it reports the end, and frees its
    own memory of it then (reviewer/worker/runtime.py), so no task is sent there to do so."""
    session.finished_at = timezone.now()
    # An ended session's claim lapses; claimed_by stays: the reviewer of record.
    session.claim_expires_at = None
    set_status(session, status, also=("finished_at", "claim_expires_at"))
    session_id, holder = session.pk, "" if by_holder else session.worker
    transaction.on_commit(lambda: release_state(session_id, holder))


def latest_open_pause(session: ReviewSession) -> PauseEvent | None:
    return session.pauses.filter(resumed_at__isnull=True).order_by("-halted_at").first()


def open_pause(session: ReviewSession) -> PauseEvent:
    pause = latest_open_pause(session)
    if pause is None:
        raise Conflict(_("The session has no open pause"))
    return pause


def close_open_pause(session: ReviewSession, outcome: str) -> None:
    pause = latest_open_pause(session)
    if pause is not None:
        pause.resumed_at = timezone.now()
        pause.outcome = pause.outcome or outcome
        pause.save(update_fields=["resumed_at", "outcome"])


def kept(error: str) -> dict[str, Any]:
    """An engine Message's template and values, under "message", for a record that also keeps
    its English words: a page shows it in its reader's language (reviewer.web.ui_text)."""
    return {"message": events.stored_value(error)} if isinstance(error, Message) else {}


def fail(session_id: int, error: str, segment: str | None = None) -> None:
    """The session failed; unless ``segment`` names a segment already superseded (a worker
    cut off from Postgres, whose session another worker took over meanwhile)."""
    with transaction.atomic():
        session = S.objects.select_for_update().filter(pk=session_id).first()
        if session is None or session.is_final:
            return
        if segment is not None and session.segment != segment:
            return
        session.error = error
        session.error_message = kept(error).get("message", {})
        session.save(update_fields=["error", "error_message"])
        failed = audit.append("failed", "engine", session, {"error": str(error)} | kept(error))
        audit_graph.explain(session, "failure", failed, len(session.generated_ids))
        finish(session, S.FAILED)
        events.emit(session.pk, events.ERROR, events.error(error))


def set_flag(action: Callable[[int], object], session_id: int) -> None:
    try:
        action(session_id)
    except pause_flags.RedisUnavailable as exc:
        raise Unavailable(
            _("%(error)s: nothing was changed; try again in a moment") % {"error": error_text(exc)}
        ) from None


# --- handing work to a worker ------------------------------------------------------------


def live_holder(worker: str) -> str | None:
    """The Celery hostname (own queue) of the worker that ran a session, if that process is
    still alive (it may hold the state); None for a dead or a previous incarnation."""
    return liveness.hostname_of(worker) if worker and liveness.is_alive(worker) else None


def dispatch_segment(session: ReviewSession) -> None:
    """Hand the session to a worker after commit: the one holding its state if it is alive.
    Called before the status changes: hooks run after commit in the order they were added, so
    the task is on its way before the status's broadcasts (2-3 ms) and the worker starts
    while they go out."""
    session.segment = uuid.uuid4().hex
    session.save(update_fields=["segment", "updated_at"])
    holder = live_holder(session.worker)
    args = (session.pk, session.segment)
    transaction.on_commit(
        lambda: send_after_commit(
            lambda: dispatch.segment(args, holder),
            lambda: fail(args[0], QUEUE_UNREACHABLE, args[1]),
        )
    )


def send_after_commit(send: Callable[[], object], on_failure: Callable[[], object]) -> None:
    """Hand work to the broker once the command is committed. The send retries through a
    blip (dispatch._send); should the broker stay away longer, the session says so instead of
    waiting for a task that was never queued."""
    try:
        send()
    except Exception:
        log.exception("could not send a task to the broker")
        on_failure()


def release_state(session_id: int, holder: str) -> None:
    """Free what a finished session held: its control key, its vault snapshot and the
    paused state in the memory of the worker that ran it (``holder``; "": none to tell)."""
    vault.configured().discard(session_id)
    try:
        pause_flags.clear(session_id)
        if queue := live_holder(holder):
            dispatch.release(session_id, queue)
    except Exception as exc:  # Redis out of reach: the key expires, the memory is freed later
        log.warning("session %s: could not release its state: %s", session_id, exc)
