"""Words the reviewer UI shows that are not in a template: status names, the labels the
session page's JavaScript needs, and audit records told as timeline entries."""

from __future__ import annotations

import json

from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from inference.policies import POLICY_KINDS
from reviewer.models import AuditRecord


def status_labels() -> dict[str, str]:
    return {
        "draft": _("draft"),
        "running": _("running"),
        "paused": _("paused"),
        "generated": _("generated, awaiting decision"),
        "completed": _("approved"),
        "rejected": _("rejected"),
        "cancelled": _("cancelled"),
        "failed": _("failed"),
    }


def decided_text(status_label: str, note: str) -> str:
    """How a session ended: its status, and the reviewer's comment or the error, if any."""
    if not note:
        return status_label
    return _("%(status)s: %(note)s") % {"status": status_label, "note": note}


def js_labels() -> dict[str, str]:
    """Translated strings for the session page's script; keys are what the script asks for."""
    return {
        "connected": _("Live"),
        "connecting": _("Connecting…"),
        "reconnecting": _("Connection lost, reconnecting…"),
        "closed": _("Disconnected"),
        "pause": _("Pause"),
        "resume": _("Resume"),
        "probability": _("Probability"),
        "entropy": _("Entropy"),
        "alternatives": _("Top alternatives"),
        "manual": _("You paused the generation."),
        "policy": _("Policy"),
        "matched": _("Matched text"),
        "position": _("At token"),
        "rollbackHere": _("Roll back to here"),
        "rollbackHint": _("Removes this token and everything after it."),
        "replace": _("Replace"),
        "useTerm": _("Use"),
        "noMatch": _("No glossary term matches the selection; all terms are listed."),
        "selected": _("Selected"),
        "layer": _("Layer"),
        "head": _("Head"),
        "token": _("Token"),
        "attentionTo": _("attention to"),
        "prompt": _("prompt"),
        "generated": _("generated"),
        "headsOfLayer": _("Heads of layer"),
        "loadingHeads": _("Loading the heads of layer %(layer)s…"),
        "commentRequired": _("Please say why you reject the text."),
        "finished": _("Generation finished."),
        "error": _("Error"),
        "edited": _("Edited"),
        "rolledBack": _("Rolled back"),
        "flagged": _("Flagged"),
        "nextToken": _("Next token"),
        "pausedAt": _("Paused before token"),
        "noAlternatives": _("No alternatives recorded."),
        "commandQueued": _("%(command)s: waiting for the connection…"),
        "commandSent": _("%(command)s: sent, waiting for the server…"),
        "decided": _("%(status)s: %(note)s"),
    }


def command_labels() -> dict[str, str]:
    """What the session page calls each command it sends, while it waits for the answer."""
    return {
        "pause": _("Pause"),
        "resume": _("Resume"),
        "edit": _("Replace"),
        "choose": _("Choose an alternative"),
        "rollback": _("Roll back to here"),
        "attention": _("Heads of layer"),
        "approve": _("Approve"),
        "reject": _("Reject"),
    }


def reason_template(kind: str, count: int = 2) -> str | None:
    """Why a policy of this kind fired, in the active language, with %(name)s placeholders
    for its decision's evidence (plus %(value)s of a tool call, %(start)s/%(end)s of a
    drift window; see ``reason_values``); ``count`` picks the sentence plural."""
    templates = {
        "keyword": lambda: _('Keyword "%(keyword)s" appeared'),
        "regex": lambda: _('Pattern /%(pattern)s/ matched "%(matched)s"'),
        "low_confidence": lambda: _("Top-1 probability %(top1_prob)s is below %(threshold)s"),
        "high_entropy": lambda: _("Entropy %(entropy)s nats is above %(threshold)s"),
        "overconfidence": lambda: _(
            'Top-1 probability %(top1_prob)s above %(threshold)s right after "%(matched)s"'
        ),
        "sentence_count": lambda: ngettext(
            "%(n)d complete sentence", "%(n)d complete sentences", count
        ).replace("%(n)d", "%(sentences)s"),
        "tool_call": lambda: _('Tool call with "%(key)s": %(value)s'),
        "drift": lambda: _(
            "Drift over tokens %(start)s-%(end)s: mean entropy %(mean_entropy)s, "
            "similarity to prompt %(mean_similarity)s"
        ),
    }
    make = templates.get(kind)
    return make() if make else None


def reason_values(evidence: dict) -> dict:
    """A decision's evidence plus the values templates derive from it."""
    values = dict(evidence)
    window = values.get("window")
    if isinstance(window, list) and len(window) == 2:
        values["start"], values["end"] = window
    obj, key = values.get("object"), values.get("key")
    if isinstance(obj, dict) and key in obj:
        values["value"] = json.dumps(obj[key], ensure_ascii=False)
    return values


def reason_templates() -> dict[str, str | None]:
    """The templates for the session page's script, which fills them from each decision's
    evidence. English pages show the engine's own wording, so they need none."""
    if (translation.get_language() or "en").startswith("en"):
        return {}
    return {kind: reason_template(kind) for kind in POLICY_KINDS}


AUDIT_ACTIONS = {
    "start": gettext_lazy("Session started"),
    "pause_requested": gettext_lazy("Pause requested"),
    "paused": gettext_lazy("Paused"),
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
}


def audit_entry(record: AuditRecord) -> dict:
    return {
        "time": record.created_at.isoformat(),
        "actor": record.actor,
        "action": str(AUDIT_ACTIONS.get(record.action, record.action)),
        "detail": audit_detail(record.action, record.payload),
    }


def audit_detail(action: str, payload: dict) -> str:
    """One readable line of what a record holds; the full payload stays in the admin."""
    if action == "paused":
        if payload.get("trigger") == "manual":
            return payload.get("reason", "")
        return f"{payload.get('trigger', '')}: {payload.get('reason', '')}"
    if action in ("approve", "reject"):
        return payload.get("comment", "")
    if action.startswith("edit_") and "text_after" in payload:
        return f"“{payload.get('text_before', '')}” → “{payload.get('text_after', '')}”"
    requested_text = payload.get("text_after") or payload.get("text")  # older records: "text"
    if action.endswith("_requested") and requested_text:
        return f"→ “{requested_text}”"
    if action == "generated":
        return _("%(tokens)s tokens (%(reason)s)") % {
            "tokens": payload.get("tokens", "?"),
            "reason": payload.get("reason", ""),
        }
    return str(payload.get("error") or payload.get("reason") or payload.get("domain") or "")
