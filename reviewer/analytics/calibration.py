"""Calibrating a policy on history: where it would have paused the domain's recent sessions,
how often, and whether reviewers acted there.

The stored events of a session give back its final tokens with their signals (a token
event per drawn token; an edit or rollback replaces the tokens from its position on), and
where a reviewer edited or rolled back. The engine's `replay` runs the policies over those
tokens; this module gathers the data and sums up what a page shows.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from inference.policies import (
    PolicySet,
    RecordedToken,
    ReplayStop,
    has_similarity,
    replay,
    similarity_policies,
)
from reviewer import events
from reviewer.analytics.policy_trial import Segment, TrialPause, localized_reason, segments_of
from reviewer.lifecycle import record
from reviewer.models import Domain, ReviewSession, SessionEvent

RECENT_SESSIONS = 20
EXAMPLES = 3
NEAR_TOKENS = 3  # a pause this close to a reviewer's edit counts as one the reviewer acted on


@dataclass(frozen=True)
class Intervention:
    """Tokens a reviewer changed: an edit's or a rollback's token range."""

    start: int
    end: int

    def near(self, position: int) -> bool:
        return self.start - NEAR_TOKENS <= position <= self.end + NEAR_TOKENS


@dataclass
class History:
    """One session as stored: its final tokens and where reviewers changed it."""

    session: int
    tokens: list[RecordedToken] = field(default_factory=list)
    interventions: list[Intervention] = field(default_factory=list)
    # (pause id, the folded tokens as they were at the pause): later edits replace tokens,
    # so what the model wrote there is only known at that moment
    pauses: list[tuple[int, list[record.Token]]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(token.text for token in self.tokens)


@dataclass(frozen=True)
class SessionReplay:
    session: int
    tokens: int
    pauses: list[TrialPause]
    acted: int  # pauses near a reviewer's edit or rollback
    text: str
    segments: list[Segment]


@dataclass(frozen=True)
class Calibration:
    sessions: list[SessionReplay]
    skipped: list[str]  # policies not replayed: drift, when no session stored its similarity
    recent: int = 0  # recent sessions of the domain with generated text
    without_similarity: int = 0  # of those, sessions that stored no similarity for drift

    @property
    def pause_counts(self) -> list[int]:
        return [len(s.pauses) for s in self.sessions]

    @property
    def median(self) -> float:
        return statistics.median(self.pause_counts) if self.sessions else 0.0

    @property
    def worst(self) -> int:
        return max(self.pause_counts, default=0)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.sessions)

    @property
    def per_100_tokens(self) -> float:
        return 100 * sum(self.pause_counts) / self.tokens if self.tokens else 0.0

    @property
    def acted_share(self) -> float | None:
        total = sum(self.pause_counts)
        return sum(s.acted for s in self.sessions) / total if total else None

    @property
    def examples(self) -> list[SessionReplay]:
        """The sessions with the most pauses, where an admin sees the most at once."""
        return sorted(self.sessions, key=lambda s: -len(s.pauses))[:EXAMPLES]


def calibrate(
    specs: list[dict[str, Any]], domain: Domain, limit: int = RECENT_SESSIONS
) -> Calibration:
    """Replay `specs` over the domain's `limit` most recent sessions that generated text,
    within the domain's pause budget as the engine keeps it; PolicyConfigError if a spec is
    bad.

    Drift reads each token's stored similarity to the prompt: with drift among `specs`, the
    sessions that stored none are left out (and counted), so that every replayed session
    is judged by every policy. When none stored it, drift is skipped instead and the other
    policies replay over them all; with no other policy, nothing is replayed."""
    histories = [h for h in map(history_of, recent_sessions(domain, limit)) if h.tokens]
    needing = similarity_policies(specs)  # also validates the specs
    replayed = [h for h in histories if has_similarity(h.tokens)] if needing else histories
    lacking = len(histories) - len(replayed)
    skipped = needing if histories and not replayed else []
    if skipped and len(PolicySet.from_specs(specs).policies) > len(skipped):
        replayed = histories  # the other policies still replay over them all
    budget = domain.pause_budget()
    replays = [session_replay(h, replay(specs, h.tokens, budget)) for h in replayed]
    return Calibration(replays, skipped, len(histories), lacking)


def recent_sessions(domain: Domain, limit: int) -> Iterable[ReviewSession]:
    return ReviewSession.objects.filter(domain=domain).exclude(generated_ids=[])[:limit]


def history_of(session: ReviewSession) -> History:
    """The session's final tokens, folded from its events in order (reviewer/lifecycle/record.py),
    with where it paused and where reviewers changed it."""
    history = History(session.pk)
    stored = SessionEvent.objects.filter(session=session).order_by("seq")
    folded: list[record.Token] = []
    for event in stored.filter(type__in=(*record.FOLDED, events.PAUSE)).only("type", "payload"):
        try:
            observe(history, folded, event.type, event.payload)
            record.apply(folded, event.type, event.payload)
        except (KeyError, TypeError, ValueError):
            continue  # a malformed payload is skipped
    history.tokens = [t for t in map(recorded, folded) if t is not None]
    return history


def recorded(token: record.Token) -> RecordedToken | None:
    """The token with its stored signals; None where it has none to replay (an edit's
    fallback piece, the piece a finish kept of a token its stop string began in)."""
    try:
        return stored_token(token.text, dict(token.signals))
    except (KeyError, TypeError, ValueError):
        return None


def observe(
    history: History, tokens: list[record.Token], kind: str, payload: dict[str, Any]
) -> None:
    """What calibration notes beside the tokens: pauses, and the ranges reviewers changed."""
    if kind == events.PAUSE:
        # a shallow copy is the snapshot: record.apply replaces Tokens, never changes one
        history.pauses.append((int(payload["pause_id"]), list(tokens)))
    elif kind in (events.EDITED, events.TRUNCATED):
        start = int(payload["token_start"])
        end = max(start, int(payload["token_end"]) - 1)
        history.interventions.append(Intervention(start, end))


def stored_token(text: str, payload: dict[str, Any]) -> RecordedToken:
    """A token as the web side stores it: a token event's chosen-token probability and
    top alternatives (the best is the top-1), or an edit's per-token top1; the similarity
    to the prompt where it was stored (None in sessions from before it was, or on vLLM)."""
    alternatives = payload.get("alternatives") or []
    probs = [float(a["prob"]) for a in alternatives[:2]]
    top1 = float(payload["top1"]) if "top1" in payload else (probs or [payload["probability"]])[0]
    margin = probs[0] - probs[1] if len(probs) == 2 else 0.0
    return RecordedToken(
        text=str(text),
        top1_prob=float(top1),
        entropy=float(payload["entropy"]),
        margin=margin,
        chosen_prob=_number(payload.get("probability")),
        similarity=_number(payload.get("similarity")),
    )


def _number(value: Any) -> float | None:
    return float(value) if value is not None else None


def session_replay(history: History, stops: list[ReplayStop]) -> SessionReplay:
    text = history.text
    pauses = [
        trial_pause(number, stop, text)
        for number, stop in enumerate((s for s in stops if s.pauses), start=1)
    ]
    acted = sum(any(i.near(pause.token) for i in history.interventions) for pause in pauses)
    return SessionReplay(
        history.session, len(history.tokens), pauses, acted, text, segments_of(text, pauses)
    )


def trial_pause(number: int, stop: ReplayStop, text: str) -> TrialPause:
    decision = next(d for d in stop.decisions if d.action == "pause")
    span = (decision.span[0], decision.span[1]) if decision.span is not None else None
    return TrialPause(
        number=number,
        policy=", ".join(d.policy for d in stop.decisions if d.action == "pause"),
        kind=decision.kind,
        action=decision.action,
        reason=localized_reason(decision),
        token=stop.position,
        offset=stop.offset,
        span=span,
        matched=text[span[0] : span[1]] if span else "",
    )
