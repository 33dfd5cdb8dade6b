"""A replay of policies over recorded generations: where they would have paused.

A stored session holds, per generated token, its text and the distribution it was drawn
from. Feeding those tokens to a fresh PolicySet through the policy phases a live run goes
through (phases.py) tells an admin where a policy would have stopped those sessions,
without a model. Pausing and resuming never changes the tokens, so a pause count from a
replay is the count a live run would have had; a rollback does change them, so a replay
reports it and carries on over the recorded text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inference.policies import phases
from inference.policies.base import Decision
from inference.policies.budget import PauseBudget
from inference.policies.policy_set import PolicySet, Routed
from inference.signals import Signals


@dataclass(frozen=True)
class RecordedToken:
    """One generated token as a session stored it."""

    text: str
    top1_prob: float
    entropy: float
    margin: float = 0.0
    chosen_prob: float | None = None
    similarity: float | None = None  # cosine to the prompt; None when it was not recorded

    @classmethod
    def from_event(cls, payload: Mapping[str, Any]) -> RecordedToken:
        """From a `token` event's payload (see inference/sink.py); KeyError/TypeError/ValueError
        when it is not one."""
        signals = payload["signals"]
        return cls(
            text=str(payload["text"]),
            top1_prob=float(signals["top1_prob"]),
            entropy=float(signals["entropy"]),
            margin=float(signals.get("margin") or 0.0),
            chosen_prob=_number(signals.get("chosen_prob")),
            similarity=_number(payload.get("similarity")),
        )

    def signals(self, drawn: bool) -> Signals:
        """The distribution it was drawn from: before_token (``drawn`` False) without the
        chosen token's probability, after_token with it."""
        chosen = self.chosen_prob if drawn else None
        return Signals(self.top1_prob, self.entropy, self.margin, (), chosen_prob=chosen)


@dataclass(frozen=True)
class ReplayStop:
    """One place the policies would have acted: a pause, a rollback or a flag."""

    position: int  # generated tokens before the stop (the engine's pause position)
    phase: str  # "before_token" | "after_token"
    offset: int  # characters of generated text before the stop
    decisions: tuple[Decision, ...]

    @property
    def pauses(self) -> bool:
        return any(d.action == "pause" for d in self.decisions)


def similarity_policies(specs: list[dict[str, Any]]) -> list[str]:
    """Names of the enabled policies of `specs` that read each token's similarity to the
    prompt (drift); PolicyConfigError on a bad spec."""
    return [p.name for p in PolicySet.from_specs(specs).policies if p.needs_hidden_states]


def has_similarity(tokens: Sequence[RecordedToken]) -> bool:
    """Whether every token has its similarity to the prompt recorded: drift, which averages
    it over a window, is replayed exactly only then."""
    return all(token.similarity is not None for token in tokens)


def unreplayable(specs: list[dict[str, Any]], tokens: Sequence[RecordedToken]) -> list[str]:
    """Names of enabled policies a replay over `tokens` cannot judge: those that need the
    hidden-state similarity when some token has none recorded."""
    names = similarity_policies(specs)
    return [] if has_similarity(tokens) else names


def replay(
    specs: list[dict[str, Any]],
    tokens: Sequence[RecordedToken],
    budget: PauseBudget | dict[str, Any] | None = None,
) -> list[ReplayStop]:
    """Every stop the enabled policies of `specs` would make over one recorded generation,
    in order, within the pause `budget` as a live run keeps it (a pause the budget or a
    higher priority refuses is a flag). Policies `unreplayable` names are left out;
    PolicyConfigError on a bad spec."""
    skipped = set(unreplayable(specs, tokens))
    every = PolicySet.from_specs(specs, budget)
    record = _Record(PolicySet([p for p in every.policies if p.name not in skipped], every.budget))
    stops: list[ReplayStop] = []
    for position, token in enumerate(tokens):
        routed = phases.before_token(record, token.signals(drawn=False), position)
        stops += record.stops(routed, position, "before_token")
        start = record.append(token)
        routed = phases.after_token(record, token.signals(drawn=True), position + 1, start)
        stops += record.stops(routed, position + 1, "after_token")
    return stops


def _number(value: Any) -> float | None:
    return float(value) if value is not None else None


class _Record:
    """A recorded generation as the policy phases read it (see phases.Generation), grown
    one token at a time."""

    def __init__(self, policies: PolicySet) -> None:
        self.policies = policies
        self.text = ""
        self.top1_history: list[float] = []
        self.entropy_history: list[float] = []
        self.similarity_history: list[float | None] = []

    def append(self, token: RecordedToken) -> int:
        """Add the token; returns where its text starts."""
        start = len(self.text)
        self.text += token.text
        self.top1_history.append(token.top1_prob)
        self.entropy_history.append(token.entropy)
        self.similarity_history.append(token.similarity)
        return start

    def stops(self, routed: Routed, position: int, phase: str) -> list[ReplayStop]:
        """One step's routed decisions as the engine acts on them, without a rollback to
        follow: the pause (with any rollback beside it) noted in the budget's ledger, the
        rest reported as flags."""
        stops: list[ReplayStop] = []
        if routed.pauses:
            phases.note_pause(self, position, phase)
            stops.append(ReplayStop(position, phase, len(self.text), tuple(routed.pauses)))
        if routed.flags:
            stops.append(ReplayStop(position, phase, len(self.text), tuple(routed.flags)))
        return stops
