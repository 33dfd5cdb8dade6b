"""A session's audit records told as timeline entries, in the page's language.

The records keep what happened in the engine's terms (English reasons, the policy's name,
``eos``); a reviewer reads it here in their own words: the policy's display name, its reason
from the Chinese template where the page is Chinese, how generation stopped, who acted.

Who acted: the engine is "system", an application its name, a person their username. The
engine records a manual pause, but the reviewer who asked for it made it: the pause is
credited to them, by name, or as "you" when they read their own trail.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from reviewer.models import AuditRecord, Domain, PauseEvent, ReviewSession, statuses
from reviewer.web.ui_text import filled_reason, kept_message, stop_reason_text, task_type_names

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

AUDIT_ACTIONS = {
    "start": gettext_lazy("Session started"),
    "pause_requested": gettext_lazy("Pause requested"),
    "paused": gettext_lazy("Paused"),
    "reopen": gettext_lazy("Reopened to correct the generated text"),
    "resume": gettext_lazy("Resumed"),
    "replace_requested": gettext_lazy("Replacement requested"),
    "choose_requested": gettext_lazy("Alternative chosen"),
    "truncate_requested": gettext_lazy("Rollback requested"),
    "edit_replace": gettext_lazy("Text replaced"),
    "edit_choose": gettext_lazy("Alternative applied"),
    "edit_truncate": gettext_lazy("Rolled back"),
    "edit_refused": gettext_lazy("Edit refused"),
    "rolled_back": gettext_lazy("Rolled back by policy"),
    "flagged": gettext_lazy("Flagged by policy"),
    "generated": gettext_lazy("Generation finished"),
    "approve": gettext_lazy("Approved"),
    "reject": gettext_lazy("Rejected"),
    "cancel": gettext_lazy("Cancelled"),
    "failed": gettext_lazy("Failed"),
    "redispatched": gettext_lazy("Moved to another worker"),
    "mute": gettext_lazy("Policy muted for this session"),
    "unmute": gettext_lazy("Policy unmuted"),
    "time_told": gettext_lazy("Told the model the time"),
    "time_not_told": gettext_lazy("Could not tell the model the time"),
    "claim": gettext_lazy("Claimed"),
    "renew": gettext_lazy("Claim renewed"),
    "release": gettext_lazy("Claim released"),
    "reassign": gettext_lazy("Claim reassigned"),
    "claim_expired": gettext_lazy("Claim expired"),
    "task_corrected": gettext_lazy("Task type corrected"),
}
# Details that quote what people or the model wrote: shown as they are, never translated.
QUOTING = {"approve", "reject", "failed", "edit_refused", "replace_requested"}
QUOTING_PREFIX = "edit_"
# Pauses nobody's policy made: a person asked for them.
MANUAL_TRIGGERS = ("manual", "external", "")
# How the audit chain names the machinery and an application (reviewer.models.Application).
SYSTEM_ACTORS = ("engine", "system")
APPLICATION_PREFIX = "app:"
# What ends a pause request without a pause (a resume clears a request a pause overtook).
REQUEST_ENDS = {"resume", "generated", "failed", "cancel"}


class Teller:
    """Tells one session's records; looks up its pauses and policy names once."""

    def __init__(self, session: ReviewSession, reader: str = "") -> None:
        self.session = session
        self.reader = reader  # the username of who reads the trail
        # Pauses can share a position (a rollback, then a pause there again): each position's
        # in the order they halted, taken in turn by its "paused" records (a reopen has none).
        self.pauses: dict[int, deque[PauseEvent]] = defaultdict(deque)
        told = PauseEvent.objects.filter(session=session).exclude(kind=PauseEvent.REOPENED)
        for pause in told.order_by("halted_at", "id"):
            self.pauses[pause.position].append(pause)
        self.names = policy_names(session.domain)
        self.asked = ""  # who asked for the pause that has not come yet

    def entry(self, record: AuditRecord) -> dict[str, Any]:
        actor = self.actor(record)
        return {
            "time": record.created_at.isoformat(),
            "kind": record.action,
            "actor": actor_name(actor),
            "actor_id": actor,  # as the audit chain names them
            "action": str(AUDIT_ACTIONS.get(record.action, record.action)),
            "detail": self.detail(record.action, record.payload, actor),
            "quotes": record.action in QUOTING or record.action.startswith(QUOTING_PREFIX),
        }

    def actor(self, record: AuditRecord) -> str:
        """Who acted. The engine records every pause; a manual one is the reviewer's who asked
        for it (the last request since the pause before; a policy's pause that overtook a
        request answers it too), else the session's reviewer."""
        if record.action == "pause_requested":
            self.asked = record.actor
        elif record.action in REQUEST_ENDS:
            self.asked = ""  # the run that would have paused ended, or was resumed anew
        if record.action != "paused":
            return record.actor
        asked, self.asked = self.asked, ""
        if record.payload.get("trigger", "") not in MANUAL_TRIGGERS:
            return record.actor
        return asked or self.session.reviewer_name or record.actor

    def detail(self, action: str, payload: dict[str, Any], actor: str = "") -> str:
        """One readable line of what a record holds; the full payload stays in the admin."""
        if action == "paused":
            return self.pause_detail(payload, actor)
        if action in ("approve", "reject"):
            return str(payload.get("comment", ""))
        if action.startswith("edit_") and "text_after" in payload:
            return f"“{payload.get('text_before', '')}” → “{payload.get('text_after', '')}”"
        requested_text = payload.get("text_after") or payload.get("text")  # older: "text"
        if action.endswith("_requested") and requested_text:
            return f"→ “{requested_text}”"
        if action == "generated":
            return _("%(tokens)s tokens: %(reason)s") % {
                "tokens": payload.get("tokens", "?"),
                "reason": stop_reason_text(payload.get("reason", ""), self.session.max_new_tokens),
            }
        if action in ("flagged", "rolled_back"):
            return self.policy_line(payload.get("policy", ""), payload)
        if action == "start":
            return self.domain_name(payload.get("domain", ""))
        if action == "reassign":
            return _("to %(reviewer)s") % {"reviewer": payload.get("reviewer", "")}
        if action in ("mute", "unmute"):
            policy = str(payload.get("policy", ""))
            return self.names.get(policy, policy)
        if action == "task_corrected":
            return task_change(payload)
        if payload.get("error"):  # an engine's words, in the reader's language where kept
            return kept_message(payload.get("message"), str(payload["error"]))
        return str(payload.get("reason") or payload.get("text") or "")

    def pause_detail(self, payload: dict[str, Any], actor: str = "") -> str:
        pause = self.next_pause(payload.get("position", -1))  # a manual one takes its turn too
        trigger = payload.get("trigger", "")
        if trigger in MANUAL_TRIGGERS:
            if actor and actor == self.reader:
                return _("You paused the generation.")
            if not actor or actor in SYSTEM_ACTORS:
                return _("A reviewer paused the generation.")
            return _("%(reviewer)s paused the generation.") % {"reviewer": actor_name(actor)}
        decision = {"reason": payload.get("reason", "")}
        if pause is not None:
            decision.update(kind=pause.kind, evidence=pause.evidence)
        return self.policy_line(trigger, decision)

    def next_pause(self, position: int) -> PauseEvent | None:
        """The pause a "paused" record at ``position`` tells: the earliest not told yet."""
        waiting = self.pauses.get(position)
        return waiting.popleft() if waiting else None

    def policy_line(self, policy: str, decision: dict[str, Any]) -> str:
        reason = str(decision.get("reason", ""))
        reason = filled_reason(decision.get("kind", ""), decision.get("evidence"), reason)
        if not policy:
            return reason
        return _("%(policy)s: %(reason)s") % {
            "policy": self.names.get(policy, policy),
            "reason": reason,
        }

    def domain_name(self, name: str) -> str:
        domain = Domain.objects.filter(name=name).first()
        return domain.display_name if domain else name


def task_change(payload: dict[str, Any]) -> str:
    """ "Open → Deterministic": the label the session had and the reviewer's."""
    names = task_type_names()
    given, corrected = str(payload.get("given", "")), str(payload.get("corrected", ""))
    return f"{names.get(given, given)} → {names.get(corrected, corrected)}"


def policy_names(domain: Domain) -> dict[str, str]:
    """Each of the domain's policies by its name, as the page shows it."""
    return {p.name: p.display_name for p in domain.policies.all()}


def actor_name(actor: str) -> str:
    """An audit actor as people read it: "system", "Demo application (application)", or a
    username as it is."""
    if actor in SYSTEM_ACTORS:
        return _("system")
    if actor.startswith(APPLICATION_PREFIX):
        return _("%(name)s (application)") % {"name": actor.removeprefix(APPLICATION_PREFIX)}
    return actor


def timeline(
    session: ReviewSession, reader: AbstractBaseUser | AnonymousUser | str | None = None
) -> list[dict[str, Any]]:
    """The session's records as entries; ``reader`` (who reads them) sees their own manual
    pauses as "You paused", anyone else reads the reviewer's name."""
    if reader is not None and not isinstance(reader, str):
        reader = reader.get_username() if reader.is_authenticated else ""
    teller = Teller(session, reader or "")
    # A graph's digest is bookkeeping of the chain: the graphs have a page of their own.
    records = AuditRecord.objects.filter(session=session).exclude(action="audit_graph")
    return [teller.entry(record) for record in records.order_by("id")]


DECISIONS = ("approve", "reject", "cancel")


def last_decision(session: ReviewSession) -> AuditRecord | None:
    """The record of how a finished session was decided (or cancelled), if it has one."""
    records = AuditRecord.objects.filter(session=session, action__in=DECISIONS)
    return records.order_by("-id").first()


def stop_reason(session: ReviewSession) -> str:
    """Why generation stopped, for a session whose model has finished; empty otherwise (and
    once an edit reopened the text: it is paused, and may run on)."""
    if session.status in statuses.LIVE:
        return ""
    record = AuditRecord.objects.filter(session=session, action="generated").order_by("-id")
    found = record.first()
    if found is None:
        return ""
    return stop_reason_text(found.payload.get("reason", ""), session.max_new_tokens)
