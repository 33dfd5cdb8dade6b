"""An admin's "try this policy": where the text policies would pause in sample text, and why.

The engine's `scan_text` does the work, routing each step as a live run does; this module
turns its decisions into what a page shows: the pauses, numbered, and the flags beside them,
and the sample cut into segments, each knowing which matches cover it and which pauses fall
right after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from inference.policies import POLICY_KINDS, Decision, PauseBudget, scan_text, simulated_tokens
from reviewer.web.ui_text import reason_template, reason_values


@dataclass(frozen=True)
class TrialPause:
    number: int  # 1, 2, ... in the order generation would meet them; 0 for a flag
    policy: str
    kind: str
    action: str
    reason: str
    token: int  # 1-based number of the (simulated) token after which generation stops
    offset: int  # characters of the sample generated before the stop
    span: tuple[int, int] | None  # offsets of the matched text, when the policy names one
    matched: str


@dataclass
class Segment:
    text: str
    marks: list[int] = field(default_factory=list)  # pauses whose match covers this text
    stops: list[int] = field(default_factory=list)  # pauses that stop right after it


@dataclass(frozen=True)
class Trial:
    text: str
    pauses: list[TrialPause]  # where generation would stop
    segments: list[Segment]
    skipped: list[str]  # names of policies that need model signals, not tried
    # reported without stopping: flag actions, pauses the budget or a higher priority held
    # back, rollbacks
    flags: list[TrialPause] = field(default_factory=list)


def try_policies(
    specs: list[dict[str, Any]], text: str, budget: PauseBudget | dict[str, Any] | None = None
) -> Trial:
    """Run the text policies of `specs` over `text`, routed as a live run routes them within
    `budget` (the domain's pause budget, where known); PolicyConfigError if a spec is bad."""
    decisions = scan_text(specs, text, budget)
    ends = token_ends(text)
    stops = [d for d in decisions if d.action == "pause"]
    pauses = [to_pause(i + 1, d, text, ends) for i, d in enumerate(stops)]
    flags = [to_pause(0, d, text, ends) for d in decisions if d.action != "pause"]
    return Trial(text, pauses, segments_of(text, pauses), skipped_policies(specs), flags)


def token_ends(text: str) -> list[int]:
    """Character offset where each simulated token of `text` ends."""
    return list(accumulate(len(token) for token in simulated_tokens(text)))


def to_pause(number: int, decision: Decision, text: str, ends: list[int]) -> TrialPause:
    token = int(decision.evidence.get("position", 0))
    span = (decision.span[0], decision.span[1]) if decision.span is not None else None
    # The engine feeds one extra end-of-sample token, so a stop may fall after the last one.
    offset = ends[token] if token < len(ends) else (ends[-1] if ends else 0)
    return TrialPause(
        number=number,
        policy=decision.policy,
        kind=decision.kind,
        action=decision.action,
        reason=localized_reason(decision),
        token=min(token, len(ends) - 1) + 1 if ends else 0,
        offset=offset,
        span=span,
        matched=text[span[0] : span[1]] if span else "",
    )


def localized_reason(decision: Decision) -> str:
    """The engine's reason in the page's language."""
    evidence = decision.evidence
    template = reason_template(decision.kind, evidence.get("sentences", 2))
    try:
        return template % reason_values(evidence) if template else decision.reason
    except (KeyError, TypeError, ValueError):
        return decision.reason  # evidence shaped differently: the engine's words still explain it


def segments_of(text: str, pauses: list[TrialPause]) -> list[Segment]:
    """`text` cut at every match boundary and stop, so overlapping matches stay readable."""
    cuts = {0, len(text)}
    for pause in pauses:
        cuts.add(pause.offset)
        if pause.span is not None:
            cuts.update(pause.span)
    bounds = sorted(c for c in cuts if 0 <= c <= len(text))
    segments = []
    for start, end in zip(bounds, bounds[1:] or [len(text)], strict=False):
        covering = [p.number for p in pauses if p.span and p.span[0] <= start and end <= p.span[1]]
        stops = [p.number for p in pauses if p.offset == end]
        segments.append(Segment(text[start:end], covering if end > start else [], stops))
    return [s for s in segments if s.text or s.stops]


def skipped_policies(specs: list[dict[str, Any]]) -> list[str]:
    return [
        str(spec.get("name"))
        for spec in specs
        if spec.get("enabled", True) is not False
        and spec.get("kind") in POLICY_KINDS
        and not POLICY_KINDS[spec["kind"]].text_only
    ]
