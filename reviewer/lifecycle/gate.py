"""The attention gate a session starts with: the request's own, else its domain's; refused
where the configured backend cannot gate. And the case text as a reviewer reads it: without
the anchor markup, which only the engine reads."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from inference.backend import GATED_ATTENTION
from inference.gating import RECALL_MARKER, GateConfig, GateConfigError, parse_anchors
from reviewer.models import Domain
from reviewer.web.arguments import InvalidInput, Text
from reviewer.web.features import backend_features
from reviewer.web.ui_text import error_text

NO_GATE_HERE = gettext_noop(
    "attention: gated attention needs the transformers backend; this installation runs"
    " %(backend)s, which does not offer it. Set the domain's attention to full, or ask for"
    ' "attention": {"mode": "full"}.'
)


TRIGGER = Text("attention.triggers[]", max_chars=100)
MAX_TRIGGERS = 100


def session_gate(domain: Domain, asked: Any) -> dict[str, Any]:
    """The gate as the session's params carry it (``params["attention"]``)."""
    if isinstance(asked, dict) and isinstance(asked.get("triggers"), list):
        check_triggers(asked["triggers"])
    try:
        gate = GateConfig.from_dict(domain.gate() if asked is None else asked)
    except GateConfigError as exc:
        raise InvalidInput(
            _("Bad decoding parameters: %(error)s") % {"error": error_text(exc)}
        ) from None
    if gate.gated and GATED_ATTENTION not in backend_features():
        raise InvalidInput(_(NO_GATE_HERE) % {"backend": backend_name()})
    return gate.to_dict()


def check_triggers(words: list[Any]) -> None:
    """Words a session stores: bounded, and storable in Postgres (the engine only checks
    that they are words)."""
    if len(words) > MAX_TRIGGERS:
        raise InvalidInput(
            _("attention.triggers holds %(count)s words; the limit is %(limit)s")
            % {"count": len(words), "limit": MAX_TRIGGERS}
        )
    for word in words:
        TRIGGER(word)


def backend_name() -> str:
    from django.conf import settings

    return str(settings.CAESURA_BACKEND)


def check_markup(text: str) -> str:
    """The case text as given, once its anchor markup is known to be well formed."""
    try:
        parse_anchors(text)
    except ValueError as exc:
        raise InvalidInput(_("input: %(error)s") % {"error": error_text(exc)}) from None
    return text


def case_text(text: str) -> tuple[str, list[dict[str, Any]]]:
    """What a reviewer reads (no markup) and where the anchors sit in it (code points). Text
    stored before anchors existed may not parse: it is shown as it is."""
    try:
        clean, anchors = parse_anchors(text)
    except ValueError:
        return text.replace(RECALL_MARKER, ""), []
    return clean, [asdict(anchor) for anchor in anchors]


COUNTS = ("sinks", "window", "top_k", "wide_top_k")


def schema() -> dict[str, Any]:
    """The attention gate (inference/gating.py GateConfig); absent: the domain's."""
    counts = {name: {"type": "integer", "minimum": 0} for name in COUNTS}
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "mode": {"type": "string", "enum": ["full", "gated"]},
            **counts,
            "triggers": {
                "type": "array",
                "maxItems": MAX_TRIGGERS,
                "items": TRIGGER.schema(),
            },
        },
        "description": "Attention gating; absent: the domain's setting",
    }
