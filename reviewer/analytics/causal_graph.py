"""The causal graph of one pause (or rollback, flag, failure), from plain facts: the readings
that crossed a line in the steps before it, the policy that fired or that the budget held back,
the outside events, and the reviewer's actions that followed. Edges say what led to what.

Pure: ``reviewer/lifecycle/audit_graph.py`` gathers the facts from the stored records and
keeps the result in the audit chain. The graph is plain JSON, in the engine's terms (English
reasons, policy names): the page tells it in the reader's language.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

VERSION = 1
WINDOW = 8  # the steps before the event whose readings may have led to it
MIN_HISTORY = 8  # steps a session needs before its own mean and spread mean anything
HISTORY = 64  # the running statistics look back this far at most
SIGMAS = 2.0
TOP1_LINE = 0.1  # without a low-confidence policy: the model weighs ten or more words
DISPERSION_LINE = 0.5  # heads at the pause look at mostly different places
SLOW_STORE_MS = 1000.0  # a snapshot slower than this delays a move to another worker

# What each policy kind reads: a reading of these led to it; any other only preceded it.
READS = {
    "low_confidence": {"top1"},
    "overconfidence": {"top1"},
    "high_entropy": {"entropy"},
    "drift": {"entropy", "similarity"},
    "learned": {"top1", "entropy", "similarity", "case_attention"},
}
# Who acts on a session after the engine stopped: these end the story of what came before.
CLOSING = {"resume", "approve", "reject", "cancel"}
DECISIONS = {"approve", "reject", "cancel"}


@dataclass(frozen=True)
class Step:
    """What the model read and wrote at one generated position."""

    position: int
    text: str
    top1: float | None = None
    entropy: float | None = None
    similarity: float | None = None
    case_attention: float | None = None  # share of its attention on the case text


@dataclass(frozen=True)
class Happening:
    """An audit record or stored event in the graph's terms (an outside event, an action)."""

    kind: str
    actor: str
    time: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Facts:
    """Everything the graph is built from, gathered from the records."""

    subject: str  # pause | rollback | flag | failure
    position: int
    time: str
    decision: dict[str, Any]  # policy, kind, action, reason, evidence ({} for a failure)
    steps: Sequence[Step]  # the session's positions before the event, in order
    heads: Sequence[Sequence[float]] = ()  # the pause's attention per head of one layer
    lines: dict[str, float] = field(default_factory=dict)  # policy thresholds by reading
    before: Sequence[Happening] = ()  # outside events and requests since the last pause
    after: Sequence[Happening] = ()  # what people did after it, in order
    error: str = ""  # a failure's sentence
    complete: bool = False


def build(facts: Facts) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    subject = subject_node(facts)
    policy = policy_node(facts)
    readings = crossed_readings(facts)
    nodes += readings
    if policy is not None:
        nodes.append(policy)
    nodes += [outside_node(i, h) for i, h in enumerate(outside_events(facts))]
    nodes.append(subject)
    nodes += [action_node(i, h) for i, h in enumerate(facts.after)]
    edges += reading_edges(readings, policy)
    edges += cause_edges(nodes, policy, facts)
    edges += following_edges(nodes, policy)
    return {
        "version": VERSION,
        "subject": facts.subject,
        "position": facts.position,
        "complete": facts.complete,
        "nodes": nodes,
        "edges": edges,
    }


# --- nodes -------------------------------------------------------------------------------


def subject_node(facts: Facts) -> dict[str, Any]:
    node: dict[str, Any] = {"id": "subject", "type": "subject", "subject": facts.subject}
    node.update(position=facts.position, time=facts.time)
    if facts.subject == "pause" and facts.decision.get("kind") == "manual":
        node["manual"] = True
    if facts.error:
        node["error"] = facts.error
        node["cause"] = failure_cause(facts.error)
    return node


def failure_cause(error: str) -> str:
    """What a failure's sentence says went wrong outside the engine, if anything."""
    lowered = error.lower()
    if "redis" in lowered:
        return "redis_outage"
    if "database" in lowered:
        return "store_failed"
    return ""


def policy_node(facts: Facts) -> dict[str, Any] | None:
    decision = facts.decision
    if not decision or decision.get("kind") == "manual":
        return None
    evidence = decision.get("evidence") or {}
    budget = evidence.get("budget") if isinstance(evidence, dict) else None
    node: dict[str, Any] = {"id": "policy", "type": "policy", "name": decision.get("policy", "")}
    node.update(kind=decision.get("kind", ""), reason=decision.get("reason", ""))
    node["outcome"] = outcome(facts.subject, budget)
    if isinstance(evidence, dict):  # what the reason is filled from, in the reader's language
        node["evidence"] = {k: v for k, v in evidence.items() if k not in ("signals", "budget")}
    if budget:
        node["budget"] = budget
    return node


def outcome(subject: str, budget: Any) -> str:
    if subject == "flag":
        return "suppressed" if budget else "flagged"
    return {"pause": "paused", "rollback": "rolled_back"}.get(subject, "fired")


def outside_events(facts: Facts) -> list[Happening]:
    """The events before it, and for a failure what its sentence says broke."""
    cause = failure_cause(facts.error) if facts.error else ""
    if not cause:
        return list(facts.before)
    return [*facts.before, Happening(cause, "engine", facts.time, {"error": facts.error})]


def outside_node(index: int, happening: Happening) -> dict[str, Any]:
    kind = "request" if happening.kind == "pause_requested" else "outside"
    node: dict[str, Any] = {"id": f"before:{index}", "type": kind, "event": happening.kind}
    node.update(actor=happening.actor, time=happening.time, detail=happening.detail)
    return node


def action_node(index: int, happening: Happening) -> dict[str, Any]:
    kind = "decision" if happening.kind in DECISIONS else "action"
    node: dict[str, Any] = {"id": f"after:{index}", "type": kind, "action": happening.kind}
    node.update(actor=happening.actor, time=happening.time, detail=happening.detail)
    return node


# --- readings ----------------------------------------------------------------------------


def crossed_readings(facts: Facts) -> list[dict[str, Any]]:
    """One node per reading that crossed its line in the window: the step that crossed it
    furthest (or where the policy that reads it fired), and how many steps crossed it."""
    steps = list(facts.steps)
    window = [s for s in steps if facts.position - WINDOW <= s.position <= facts.position]
    reads = READS.get(str(facts.decision.get("kind", "")), set())
    found = []
    for signal in ("entropy", "top1", "similarity", "case_attention"):
        # What the policy read where it fired is the reading that informed it.
        at = facts.position if signal in reads else None
        node = crossed(signal, steps, window, facts.lines.get(signal), at)
        if node is not None:
            found.append(node)
    dispersion = head_dispersion(facts.heads)
    if dispersion is not None and dispersion > DISPERSION_LINE:
        found.append(reading("head_dispersion", facts.position, "", dispersion, DISPERSION_LINE))
    return found


def crossed(
    signal: str, steps: list[Step], window: list[Step], fixed: float | None, at: int | None
) -> dict[str, Any] | None:
    worst: tuple[float, dict[str, Any]] | None = None
    count = 0
    for step in window:
        value = getattr(step, signal)
        if value is None:
            continue
        line = line_for(signal, steps, step.position, fixed)
        if line is None:
            continue
        limit, mean, sd = line
        excess = value - limit if signal == "entropy" else limit - value
        if excess <= 0:
            continue
        count += 1
        if step.position == at:
            excess = math.inf
        if worst is None or excess > worst[0]:
            node = reading(signal, step.position, step.text, value, limit, mean, sd)
            worst = excess, node
    if worst is None:
        return None
    return {**worst[1], "count": count, "window": len(window)}


def line_for(
    signal: str, steps: list[Step], position: int, fixed: float | None
) -> tuple[float, float | None, float | None] | None:
    """The line a reading crosses at ``position``: a policy's threshold where the session has
    one (top-1 falls back to a fixed line), else the session's own mean and spread before it."""
    if fixed is not None:
        return fixed, None, None
    if signal == "top1":
        return TOP1_LINE, None, None
    history = [getattr(s, signal) for s in steps if s.position < position][-HISTORY:]
    values = [v for v in history if v is not None]
    if len(values) < MIN_HISTORY:
        return None
    mean = math.fsum(values) / len(values)
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    limit = mean + SIGMAS * sd if signal == "entropy" else mean - SIGMAS * sd
    return limit, mean, sd


def reading(
    signal: str,
    position: int,
    text: str,
    value: float,
    line: float,
    mean: float | None = None,
    sd: float | None = None,
) -> dict[str, Any]:
    node: dict[str, Any] = {
        "id": f"reading:{signal}",
        "type": "reading",
        "signal": signal,
        "position": position,
    }
    node.update(token=text, value=round(value, 4), line=round(line, 4))
    node["direction"] = "above" if signal in ("entropy", "head_dispersion") else "below"
    if mean is not None and sd is not None:
        node.update(mean=round(mean, 4), sd=round(sd, 4))
    return node


def head_dispersion(heads: Sequence[Sequence[float]]) -> float | None:
    """How differently the heads look: the mean distance (total variation, 0 to 1) between
    each head's attention and the heads' average. 0: all look at the same places."""
    rows = [[float(v or 0.0) for v in row] for row in heads if row]
    if len(rows) < 2 or len({len(r) for r in rows}) != 1:
        return None
    mean = [math.fsum(col) / len(rows) for col in zip(*rows, strict=True)]
    distances = [0.5 * math.fsum(abs(a - b) for a, b in zip(r, mean, strict=True)) for r in rows]
    return math.fsum(distances) / len(distances)


# --- edges -------------------------------------------------------------------------------


def edge(source: str, target: str, relation: str) -> dict[str, str]:
    return {"from": source, "to": target, "relation": relation}


def reading_edges(
    readings: list[dict[str, Any]], policy: dict[str, Any] | None
) -> list[dict[str, str]]:
    reads = READS.get(policy["kind"], set()) if policy is not None else set()
    return [
        edge(r["id"], "policy", "informed")
        if policy is not None and r["signal"] in reads
        else edge(r["id"], "subject", "preceded")
        for r in readings
    ]


def cause_edges(
    nodes: list[dict[str, Any]], policy: dict[str, Any] | None, facts: Facts
) -> list[dict[str, str]]:
    found = []
    if policy is not None:
        found.append(edge("policy", "subject", policy["outcome"]))
    cause = failure_cause(facts.error) if facts.error else ""
    for node in nodes:
        if node["type"] == "request":
            found.append(edge(node["id"], "subject", "asked_for"))
        elif node["type"] == "outside":
            caused = cause and node["event"] == cause
            found.append(edge(node["id"], "subject", "caused" if caused else "preceded"))
    return found


def following_edges(
    nodes: list[dict[str, Any]], policy: dict[str, Any] | None
) -> list[dict[str, str]]:
    found, previous = [], "subject"
    for node in nodes:
        if node["type"] not in ("action", "decision"):
            continue
        found.append(edge(previous, node["id"], "followed_by"))
        previous = node["id"]
        muted = node["detail"].get("policy")
        if node["action"] == "mute" and policy is not None and muted == policy["name"]:
            found.append(edge(node["id"], "policy", "muted"))
    return found
