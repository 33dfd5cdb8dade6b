"""An audit graph told in the reader's language: a short label per node, and one sentence that
says why it paused (flagged, rolled back, failed) here, built from the graph alone.

The graph keeps the engine's terms (English reasons, policy names, numbers); the words here
come from the translation catalog, the policy's reason from the reason templates.
"""

from __future__ import annotations

import re
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from reviewer.analytics.timeline import AUDIT_ACTIONS, actor_name
from reviewer.web.ui_text import filled_reason, shown_apart

SUBJECTS = {
    "pause": gettext_lazy("Paused at token %(position)s"),
    "flag": gettext_lazy("Flagged at token %(position)s"),
    "rollback": gettext_lazy("Rolled back at token %(position)s"),
    "failure": gettext_lazy("Failed at token %(position)s"),
}
READINGS = {
    "entropy": gettext_lazy(
        "entropy of %(value)s nats (above the session's usual range, up to %(line)s)"
    ),
    "top1": gettext_lazy("top-1 probability of %(value)s (below %(line)s)"),
    "similarity": gettext_lazy("similarity to the prompt of %(value)s (below %(line)s)"),
    "case_attention": gettext_lazy("attention on the case text of %(value)s (below %(line)s)"),
    "head_dispersion": gettext_lazy("attention heads looking apart (%(value)s, over %(line)s)"),
}
READING_LABELS = {
    "entropy": gettext_lazy("Entropy %(value)s > %(line)s"),
    "top1": gettext_lazy("Top-1 %(value)s < %(line)s"),
    "similarity": gettext_lazy("Similarity %(value)s < %(line)s"),
    "case_attention": gettext_lazy("On the case %(value)s < %(line)s"),
    "head_dispersion": gettext_lazy("Heads apart %(value)s > %(line)s"),
}
OUTSIDE = {
    "redispatched": gettext_lazy("the worker %(worker)s was lost"),
    "redis_outage": gettext_lazy("Redis was out of reach"),
    "store_failed": gettext_lazy("the database was out of reach"),
    "store_slow": gettext_lazy("a snapshot took %(ms)s ms to store"),
    "time_told": gettext_lazy("the model was told the time"),
    "time_not_told": gettext_lazy("the model could not be told the time"),
}
OUTSIDE_LABELS = {
    "redispatched": gettext_lazy("Worker lost"),
    "redis_outage": gettext_lazy("Redis out of reach"),
    "store_failed": gettext_lazy("Database out of reach"),
    "store_slow": gettext_lazy("Slow snapshot"),
    "time_told": gettext_lazy("Told the time"),
    "time_not_told": gettext_lazy("Time not told"),
}
OUTCOMES = {
    "paused": gettext_lazy("paused"),
    "suppressed": gettext_lazy("held back by the budget"),
    "flagged": gettext_lazy("flagged"),
    "rolled_back": gettext_lazy("rolled back"),
}
BUDGET_DETAILS = [
    (
        re.compile(r"(?P<n>\d+) tokens after the last pause; the budget asks for (?P<min>\d+)"),
        gettext_lazy("%(n)s tokens after the last pause, where the budget asks for %(min)s"),
    ),
    (
        re.compile(r"(?P<n>\d+) pauses in the last (?P<window>\d+) tokens"),
        gettext_lazy("%(n)s pauses in the last %(window)s tokens already"),
    ),
    (re.compile(r'"(?P<policy>.+)" paused here'), gettext_lazy("%(policy)s paused here instead")),
    (re.compile(r"no text yet"), gettext_lazy("no text was written yet")),
]
MAX_CAUSES = 3  # a sentence, not a list: the drawing shows the rest


def by_type(graph: dict[str, Any], *types: str) -> list[dict[str, Any]]:
    return [n for n in graph.get("nodes", []) if n["type"] in types]


def why(graph: dict[str, Any], names: dict[str, str]) -> str:
    """One sentence: what happened here, because of what, after what."""
    head = headline(graph, names)
    causes = [reading_phrase(n) for n in ranked_readings(graph)]
    causes += [outside_phrase(n) for n in by_type(graph, "outside")]
    causes = causes[:MAX_CAUSES]
    if not causes:
        return _("%(head)s.") % {"head": head}
    return _("%(head)s, after %(causes)s.") % {"head": head, "causes": joined(causes)}


def headline(graph: dict[str, Any], names: dict[str, str]) -> str:
    subject = by_type(graph, "subject")[0]
    policies = by_type(graph, "policy")
    if subject.get("error"):
        return _("The session failed here: %(error)s") % {"error": bare(subject["error"])}
    if not policies:
        asked = by_type(graph, "request")
        actor = actor_name(asked[0]["actor"]) if asked else _("a reviewer")
        return _("It paused here because %(actor)s asked for it") % {"actor": actor}
    policy = policies[0]
    values = {"policy": names.get(policy["name"], policy["name"]), "reason": reason(policy)}
    if policy["outcome"] == "suppressed":
        values["budget"] = budget_detail(policy.get("budget") or {}, names)
        return (
            _(
                "It did not pause here: %(policy)s fired (%(reason)s), but the pause budget held it back (%(budget)s)"
            )
            % values
        )
    templates = {
        "paused": _("It paused here because %(policy)s fired: %(reason)s"),
        "flagged": _("%(policy)s flagged the text here: %(reason)s"),
        "rolled_back": _("The engine rolled back here because %(policy)s fired: %(reason)s"),
    }
    return templates.get(policy["outcome"], templates["flagged"]) % values


def reason(policy: dict[str, Any]) -> str:
    text = str(policy.get("reason", ""))
    text = text.split(" (not paused:")[0]  # the budget's part is told on its own
    return bare(filled_reason(policy.get("kind", ""), policy.get("evidence"), text))


def bare(text: str) -> str:
    return text.strip().rstrip(".。")


def budget_detail(budget: dict[str, Any], names: dict[str, str]) -> str:
    detail = str(budget.get("detail", ""))
    for pattern, template in BUDGET_DETAILS:
        match = pattern.search(detail)
        if match is not None:
            values = match.groupdict()
            if "policy" in values:
                values["policy"] = names.get(values["policy"], values["policy"])
            return str(template) % values
    return detail


def ranked_readings(graph: dict[str, Any]) -> list[dict[str, Any]]:
    """Readings that informed the policy first, then those that only preceded it; not the
    one the policy's reason states already (what it read at the very step it fired)."""
    informed = {e["from"] for e in graph.get("edges", []) if e["relation"] == "informed"}
    at = graph.get("position")
    readings = [
        n for n in by_type(graph, "reading") if not (n["id"] in informed and n["position"] == at)
    ]
    return sorted(readings, key=lambda n: n["id"] not in informed)


def reading_phrase(node: dict[str, Any]) -> str:
    return str(READINGS[node["signal"]]) % shown(node)


def outside_phrase(node: dict[str, Any]) -> str:
    detail = node.get("detail") or {}
    values = {"worker": detail.get("lost_worker", ""), "ms": detail.get("ms", "?")}
    template = OUTSIDE.get(node["event"])
    return str(template) % values if template is not None else node["event"]


# Readings that are shares, shown as percentages as the session page shows probabilities.
SHARES = ("top1", "case_attention")


def shown(node: dict[str, Any]) -> dict[str, str]:
    """The value and its line, as precise as it takes to tell them apart."""
    share = node["signal"] in SHARES
    value, line = shown_apart(float(node["value"]), float(node["line"]), share)
    return {"value": value, "line": line}


def joined(parts: list[str]) -> str:
    if len(parts) == 1:
        return parts[0]
    return _("%(first)s and %(last)s") % {"first": _(", ").join(parts[:-1]), "last": parts[-1]}


# --- labels for the drawing --------------------------------------------------------------


def label(node: dict[str, Any], names: dict[str, str]) -> tuple[str, str]:
    """(title, second line) of a node in the drawing."""
    kind = node["type"]
    if kind == "reading":
        second = _("token %(position)s") % {"position": node["position"]}
        token = node.get("token", "").strip()
        return str(READING_LABELS[node["signal"]]) % shown(node), f"{second} {token}".strip()
    if kind == "policy":
        return names.get(node["name"], node["name"]), str(OUTCOMES.get(node["outcome"], ""))
    if kind == "subject":
        return str(SUBJECTS[node["subject"]]) % {"position": node["position"]}, ""
    if kind == "outside":
        detail = node.get("detail") or {}
        second = detail.get("lost_worker") or (f"{detail['ms']} ms" if "ms" in detail else "")
        return str(OUTSIDE_LABELS.get(node["event"], node["event"])), str(second)
    if kind == "request":
        return str(AUDIT_ACTIONS["pause_requested"]), actor_name(node["actor"])
    action = str(AUDIT_ACTIONS.get(node["action"], node["action"]))
    return action, actor_name(node["actor"])
