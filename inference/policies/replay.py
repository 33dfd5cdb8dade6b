"""A replay of policies over recorded generations: where they would have paused.

A stored session holds, per generated token, its text and the distribution it was drawn
from. Feeding those steps through a fresh PolicySet, phase by phase as the engine does,
tells an admin where a policy would have stopped those sessions, without a model. Pausing
and resuming never changes the tokens, so a pause count from a replay is the count a live
run would have had; a rollback does change them, so a replay reports it and carries on
over the recorded text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inference.policies.base import Decision, StepContext
from inference.policies.budget import PauseBudget
from inference.policies.policy_set import PolicySet
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
    policies = PolicySet([p for p in every.policies if p.name not in skipped], every.budget)
    history = _History()
    stops: list[ReplayStop] = []
    for position, token in enumerate(tokens):
        before = policies.evaluate(history.step("before_token", position, token))
        stops += _stops(policies, position, "before_token", history.text, before)
        history.append(token)
        after = policies.evaluate(history.step("after_token", position, token))
        stops += _stops(policies, position + 1, "after_token", history.text, after)
    return stops


def _number(value: Any) -> float | None:
    return float(value) if value is not None else None


def _stops(
    policies: PolicySet, position: int, phase: str, text: str, decisions: list[Decision]
) -> list[ReplayStop]:
    """As the engine routes one step's decisions (``PolicySet.route``, the backends'
    routing without a rollback to follow): at most one pause (with any rollback beside it),
    counted in the budget's ledger; every other decision a flag."""
    routed = policies.route(decisions, position, text)
    stops: list[ReplayStop] = []
    if routed.pauses:
        policies.note_pause(position, policy=True)
        stops.append(ReplayStop(position, phase, len(text), tuple(routed.pauses)))
    if routed.flags:
        stops.append(ReplayStop(position, phase, len(text), tuple(routed.flags)))
    return stops


class _History:
    """The text and signal histories a StepContext reads, grown one token at a time."""

    def __init__(self) -> None:
        self.text = ""
        self.new_text_start = 0
        self.top1: list[float] = []
        self.entropy: list[float] = []
        self.similarity: list[float | None] = []

    def append(self, token: RecordedToken) -> None:
        self.new_text_start = len(self.text)
        self.text += token.text
        self.top1.append(token.top1_prob)
        self.entropy.append(token.entropy)
        self.similarity.append(token.similarity)

    def step(self, phase: str, position: int, token: RecordedToken) -> StepContext:
        after = phase == "after_token"
        signals = Signals(
            top1_prob=token.top1_prob,
            entropy=token.entropy,
            margin=token.margin,
            alternatives=(),
            chosen_prob=token.chosen_prob if after else None,
        )
        return StepContext(
            phase=phase,
            position=position,
            signals=signals,
            text=self.text,
            new_text_start=self.new_text_start if after else len(self.text),
            top1_history=self.top1,
            entropy_history=self.entropy,
            similarity_history=self.similarity,
        )
