"""Words the reviewer UI shows that are not in a template: status names, the labels the
session page's JavaScript needs, policy reasons, how generation stopped and the engine's
messages."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeGuard

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from inference.message import Message
from inference.policies import POLICY_KINDS

if TYPE_CHECKING:
    from reviewer.models import ReviewSession


def translated(message: str) -> str:
    """An engine message in the active language: a Message's template through the catalog
    and its values filled in (a Message among them translated in turn); other text as is
    (a library's own words, such as a regular expression's syntax error)."""
    if not isinstance(message, Message):
        return str(message)
    values = {
        key: translated(value) if isinstance(value, Message) else value
        for key, value in message.values.items()
    }
    try:
        return _(message.template) % values
    except (KeyError, TypeError, ValueError):  # a translation that names other values
        return str(message)


def event_message(event: dict[str, Any]) -> str:
    """An error event's message in the active language, from the template and values it
    keeps (reviewer.events.error); its English text where it keeps none or they do not fit."""
    try:
        return translated(stored_message(event["template"], event["values"]))
    except (KeyError, TypeError, ValueError):
        return str(event.get("message", ""))


def stored_message(template: str, values: dict[str, Any]) -> Message:
    """A Message made again from what an event stored (reviewer.events.message_values)."""

    def value(given: Any) -> Any:
        nested = isinstance(given, dict) and set(given) == {"template", "values"}
        return stored_message(given["template"], given["values"]) if nested else given

    return Message(template, **{key: value(given) for key, given in values.items()})


def kept_message(stored: Any, english: str) -> str:
    """A Message kept as ``{"template", "values"}`` (reviewer.events.stored_value), in the
    active language; ``english`` where none was kept or it does not fit."""
    if not stored:
        return english
    try:
        return translated(stored_message(stored["template"], stored["values"]))
    except (KeyError, TypeError, ValueError, AttributeError):
        return english


def session_error(session: ReviewSession) -> str:
    """Why a session failed, in the active language where its Message was kept."""
    return kept_message(session.error_message, session.error)


def error_text(exc: Exception) -> str:
    """What an engine error says, in the active language (its Message translated)."""
    return translated(exc.args[0]) if len(exc.args) == 1 else str(exc)


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


def js_labels() -> dict[str, str | dict[str, str]]:
    """Translated strings for the session page's script; keys are what the script asks for."""
    return {
        "connected": _("Live"),
        "connecting": _("Connecting…"),
        "reconnecting": _("Connection lost, reconnecting…"),
        "closed": _("Disconnected"),
        "loggedOut": _("Your login has ended: reload the page to log in again"),
        "too_large": _(
            "Too large to send: %(size)s kB, and a command may be at most %(limit)s kB."
            " Shorten the text."
        ),
        "pause": _("Pause"),
        "resume": _("Resume"),
        "probability": _("Probability"),
        "entropy": _("Entropy"),
        # Entropy in its unit, as the reasons and the audit graphs give it.
        "nats": _("%(value)s nats"),
        "alternatives": _("Top alternatives"),
        "manual": _("You paused the generation."),
        "reopened": _("Reopened to correct the generated text"),
        "policy": _("Policy"),
        "matched": _("Matched text"),
        "labelled": _("%(label)s: "),
        "rollbackHere": _("Roll back to here"),
        "replace": _("Replace"),
        "useTerm": _("Use"),
        "noMatch": _("No glossary term matches the selection; all terms are listed."),
        "layer": _("Layer"),
        "head": _("Head"),
        "attentionTo": _("attention to"),
        "headsOfLayer": _("Heads of layer %(layer)s"),
        **attention_labels(),
        "loadingHeads": _("Loading the heads of layer %(layer)s…"),
        "plotsUnavailable": _(
            "The heatmaps could not be drawn: their script did not load. They are tried again"
            " with the next update."
        ),
        "commentRequired": _("Please say why you reject the text."),
        "justPaused": _("It has just paused: press again to resume."),
        "finished": _("Generation finished."),
        "stopReasons": stop_reasons("%(limit)s"),
        "decidedBy": _("by %(actor)s, %(time)s"),
        "system": _("system"),
        "error": _("Error"),
        "edited": _("Edited"),
        "rolledBack": _("Rolled back"),
        "flagged": _("Flagged"),
        "pausedAfter": _("Paused after “%(words)s”"),
        "pausedInsideWord": _("Paused inside a word, after “%(words)s”"),
        "pausedAtStart": _("Paused before the first word"),
        "wordPieces": _(
            "The model wrote this word in %(count)s pieces; shown: the least sure one."
        ),
        "endHere": _("end the text here"),
        "specialToken": _("a control token"),
        "partCharacter": _("part of a character"),
        "newLine": _("a new line"),
        "space": _("a space"),
        "noAlternatives": _("No alternatives recorded."),
        "stateSaved": _("Frozen state saved (%(size)s): any worker can continue from here."),
        "megabytes": _("%(n)s MB"),
        "commandQueued": _("%(command)s: waiting for the connection…"),
        "commandSent": _("%(command)s: sent, waiting for the server…"),
        "decided": _("%(status)s: %(note)s"),
        "mute": _("Mute “%(policy)s” for this session"),
        "unmute": _("Unmute “%(policy)s”"),
        **claim_labels(),
        **task_labels(),
    }


def task_type_names() -> dict[str, str]:
    return {
        "deterministic": _("Deterministic"),
        "open": _("Open"),
        "reasoning": _("Reasoning"),
    }


def task_labels() -> dict[str, str | dict[str, str]]:
    """What the page says of a reviewer's word on the task type."""
    return {
        "taskTypes": task_type_names(),
        "taskCorrected": _("Corrected to %(label)s by %(reviewer)s."),
        "taskConfirmed": _("Confirmed as %(label)s by %(reviewer)s."),
        "taskSaved": _("Task type saved: it counts toward the classifier's accuracy."),
    }


def claim_labels() -> dict[str, str]:
    """What the session page says of a gateway generation's claim."""
    return {
        "claimMine": _("Claimed by you until %(time)s; your activity here renews it."),
        "claimHeld": _("Claimed by %(reviewer)s: only they can work on it now."),
        "claimOpen": _("Unclaimed: it waits in the domain's queue. Claim it to work on it."),
        "claimEnded": _("Reviewed by %(reviewer)s."),
        "claim": _("Claim"),
        "release": _("Release"),
        "claimFirst": _("Claim this generation to resume it or decide on it."),
    }


def attention_labels() -> dict[str, str | dict[str, str]]:
    """What the page says of attention: the bars under the words, their legend, the heatmaps."""
    return {
        "attentionAtPause": _(
            "Where the model looked to choose the next token: the thicker and darker the blue "
            "bar under a word, the more (mean over all layers and heads). Click a generated "
            "word to see where it looked."
        ),
        "attentionAtPauseNoCase": _(
            "Where the model looked to choose the next token, in the generated text (the case "
            "text could not be matched to the model's tokens)."
        ),
        "attentionOfWord": _(
            "Where %(word)s looked when the model wrote it: the thicker the bar, the more."
        ),
        "attentionNoRowEdited": _(
            "No attention is recorded for %(word)s: an edit put it in place (the words an edit "
            "writes and those after them), and the model reads an edit in one step, not word "
            "by word."
        ),
        "attentionNoRowEngine": _(
            "No attention is recorded for %(word)s: on this installation the engine gives "
            "attention only at a pause."
        ),
        "attentionBack": _("Back to the pause"),
        "attentionHide": _("Hide"),
        "attentionTop": {
            "case": _("Looked at most in the case text: %(words)s"),
            "generated": _("In the generated text: %(words)s"),
        },
        "attentionRest": _(
            "These words drew %(share)s of the attention; the rest went to the system prompt "
            "and the chat template (%(first)s to the first position alone, where models park "
            "attention they do not need)."
        ),
        "attentionShare": _("%(share)s of the attention on the case and the text"),
        "attentionScale": _("attention"),
        "wordsAxis": _("Word"),
        "liveRows": _("Generated word"),
        "liveColumns": _("Earlier words (the case text is marked in yellow above)"),
        "liveMissing": _(
            "Words without a row: %(count)s. An edit put them in place (the words it wrote and "
            "those after them), and the model reads an edit in one step."
        ),
        "liveBinned": _(
            "At this width the %(count)s earlier words cannot have a column each: a column "
            "holds up to %(size)s neighbouring words, their attention added up."
        ),
        **gate_labels(),
        "kinds": {
            "template": _("system prompt and template"),
            "case": _("case text"),
            "note": _("note"),
            "generated": _("generated text"),
        },
    }


def command_labels() -> dict[str, str]:
    """What the session page calls each command it sends, while it waits for the answer."""
    return {
        "pause": _("Pause"),
        "resume": _("Resume"),
        "edit": _("Replace"),
        "choose": _("Choose an alternative"),
        "rollback": _("Roll back to here"),
        "attention": _("Heads of a layer"),
        "approve": _("Approve"),
        "reject": _("Reject"),
        "mute": _("Mute a policy"),
        "unmute": _("Unmute a policy"),
        "claim": _("Claim"),
        "release": _("Release"),
        "reassign": _("Reassign"),
        "correct_task": _("Save task type"),
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
        "learned": lambda: _(
            "A reviewer would likely step in here (score %(score)s, threshold %(threshold)s)"
        ),
        "drift": lambda: _(
            "Drift over tokens %(start)s-%(end)s: mean entropy %(mean_entropy)s, "
            "similarity to prompt %(mean_similarity)s"
        ),
    }
    make = templates.get(kind)
    return make() if make else None


def reason_values(evidence: dict[str, Any]) -> dict[str, Any]:
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
    evidence, in every language: so a probability in a reason reads as it does in the list
    of alternatives and the sparkline (one format, "24%")."""
    return {kind: reason_template(kind) for kind in POLICY_KINDS}


def filled_reason(kind: str, evidence: dict[str, Any] | None, fallback: str) -> str:
    """Why a policy fired, in the active language, filled from its decision's evidence as the
    session page fills it (probabilities as percentages); the engine's own wording when there
    is no template or a value is missing."""
    template = reason_template(kind)
    if not template or not isinstance(evidence, dict):
        return fallback
    values = reason_values(evidence)
    shown = reason_numbers(kind, values, PLACEHOLDER.findall(template))
    try:
        return template % {key: shown.get(key, value) for key, value in values.items()}
    except (KeyError, TypeError, ValueError):
        return fallback


PLACEHOLDER = re.compile(r"%\((\w+)\)s")
# At most this many decimals more than a number's usual ones, to tell it from a threshold.
MORE_DIGITS = 8


def shown_percent(share: float, digits: int = 0) -> str:
    """A probability as the page shows it: whole percentages, or up to ``digits`` decimals,
    none that would be zeros (9.7%, 10%); one too small to show reads "<1%", never "0%"."""
    least = 10.0 ** -(digits + 2)
    if 0 < share < least / 2:
        return f"<{shown_percent(least, digits)}"
    text = f"{share * 100:.{digits}f}"
    return (text.rstrip("0").rstrip(".") if "." in text else text) + "%"


def shown_measure(value: float, digits: int = 2) -> str:
    """Any other number: two decimals, more only where asked; a whole number as it is."""
    return str(int(value)) if float(value).is_integer() else str(shown_number(value, digits))


class NumberFormat(NamedTuple):
    """How a reason shows one sort of number (frontend/static/reviewer/words.js, alike)."""

    show: Callable[[float, int], str]
    least: int  # the fewest decimals it shows
    scale: int  # what a shown unit is of the value


SHARE = NumberFormat(shown_percent, 0, 100)
MEASURE = NumberFormat(shown_measure, 2, 1)


def is_probability(kind: str, key: str) -> bool:
    return "prob" in key or (key == "threshold" and kind in ("low_confidence", "overconfidence"))


def reason_numbers(kind: str, values: dict[str, Any], keys: list[str]) -> dict[str, str]:
    """The numbers among a reason's placeholders ``keys``, shown: probabilities as
    percentages, other measures with two decimals, each as precise as it takes to read
    apart from the threshold it was compared with."""
    numbers = [key for key in keys if is_number(values.get(key))]
    shown: dict[str, str] = {}
    for form in (SHARE, MEASURE):
        alike = [key for key in numbers if is_probability(kind, key) == (form is SHARE)]
        limit = values["threshold"] if "threshold" in alike else None
        others = [values[key] for key in alike if key != "threshold"]
        digits = digits_apart(others, limit, form)
        shown |= {key: form.show(values[key], digits) for key in alike}
    return shown


def shown_apart(value: float, limit: float, share: bool) -> tuple[str, str]:
    """A reading and the line it crossed, as a reason shows them (a share as a percentage)."""
    form = SHARE if share else MEASURE
    digits = digits_apart([value], limit, form)
    return form.show(value, digits), form.show(limit, digits)


def digits_apart(values: list[float], limit: float | None, form: NumberFormat) -> int:
    """The fewest decimals at which every number of ``values`` reads apart from ``limit``
    (the threshold a policy compared them with): "9.7% is below 10%", never "10% is below
    10%"; equal numbers read alike."""
    if limit is None:
        return form.least
    differing = [value for value in values if value != limit]
    for digits in range(form.least, form.least + MORE_DIGITS):
        if not any(read_alike(value, limit, digits, form) for value in differing):
            return digits
    return form.least + MORE_DIGITS


def read_alike(a: float, b: float, digits: int, form: NumberFormat) -> bool:
    """Whether two numbers read the same: the same text, or the same number rounded."""

    def rounded(value: float) -> int:
        return math.floor(value * form.scale * 10.0**digits + 0.5)  # as the script's Math.round

    return form.show(a, digits) == form.show(b, digits) or rounded(a) == rounded(b)


def is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def shown_number(value: object, digits: int = 2) -> object:
    """A fraction with ``digits`` decimals, past the second only those it needs (0.097 and
    0.10, not 0.100); a whole number, or anything else, as it is."""
    if not isinstance(value, float) or value.is_integer() or not math.isfinite(value):
        return value
    whole, _, decimals = f"{value:.{max(digits, 2)}f}".partition(".")
    return f"{whole}.{decimals[:2]}{decimals[2:].rstrip('0')}"


def stop_reasons(limit: int | str) -> dict[str, str]:
    return {
        "eos": _("The model ended the note."),
        "max_tokens": _("Stopped: reached the %(limit)s-token limit.") % {"limit": limit},
        "cancel": _("Stopped: cancelled."),
        "stop": _("Stopped at a stop string the application gave."),
    }


def stop_reason_text(reason: str, limit: int | str) -> str:
    """How generation ended, e.g. "Stopped: reached the 200-token limit." """
    return stop_reasons(limit).get(reason, reason)


def gate_labels() -> dict[str, str | dict[str, str]]:
    """What the page says of gated attention at a pause (frontend/static/reviewer/gate-view.js)."""
    return {
        "gateSummary": _("Looking at %(kept)s of %(total)s positions"),
        "gateMass": _("; %(share)s of the attention mass."),
        "gateModes": {
            "gated": "",
            "wide": _("A recall word in the recent text widened the gate."),
            "recall": _("The case asks for recall: full attention, every position."),
        },
        "gateNotLooked": _("Not looked at in this step"),
        "gateLookedAt": _("Looked at: %(reason)s"),
        "gateReasonNames": {
            "sink": _("sink"),
            "window": _("recent window"),
            "anchor": _("anchor"),
            "heavy": _("heavy hitter"),
            "recall": _("recall"),
        },
        "gateReasons": {
            "sink": _("sink: the first positions, where models park attention"),
            "window": _("recent window: the latest positions"),
            "anchor": _("anchor: a key span of the case text, always in view"),
            "heavy": _("heavy hitter: a position the model paid much attention"),
            "recall": _("recall: full attention, asked for by the case"),
            "off": _("struck through: not looked at in this step"),
        },
    }
