"""The policy half of the decode boundary: one phase's policies over a generation, routed.

Between two tokens the boundary (inference/decode.py) asks the before_token policies; after
a token is drawn it asks the after_token ones. Each phase is: a StepContext over the
generation's text and signal histories -> the PolicySet's decisions (cooldowns applied) ->
routing through the pause budget into at most one pause, a rollback, and flags. A pause
that happens is noted in the budget's ledger. The live backends (through decode.py) and the
policy replay over recorded tokens (replay.py) call these same functions; a generation is
anything with a PolicySet, its generated text and its per-token signal histories.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from inference.policies.base import Decision, StepContext
from inference.policies.policy_set import PolicySet, Routed
from inference.signals import Signals

# A backend's check that it may apply this rollback now (None where it cannot follow one).
MayRollBack = Callable[[Decision], bool]


class Generation(Protocol):
    """What the policy phases read of a generation: a DecodeState, or a replay's record."""

    @property
    def policies(self) -> PolicySet: ...

    @property
    def text(self) -> str: ...  # the generated text so far

    @property
    def top1_history(self) -> list[float]: ...  # one per generated token

    @property
    def entropy_history(self) -> list[float]: ...

    @property
    def similarity_history(self) -> list[float | None]: ...


def before_token(
    generation: Generation,
    signals: Signals,
    generated: int,
    may_roll_back: MayRollBack | None = None,
) -> Routed:
    """The before_token policies when ``generated`` tokens exist, over the next token's
    distribution (``chosen_prob`` None), routed."""
    decisions = evaluate(generation, "before_token", signals, generated, len(generation.text))
    return generation.policies.route(decisions, generated, generation.text, may_roll_back)


def after_token(
    generation: Generation,
    signals: Signals,
    generated: int,
    new_text_start: int,
    may_roll_back: MayRollBack | None = None,
) -> Routed:
    """The after_token policies on the newest token (``generated`` tokens now exist, its
    text starts at ``new_text_start``; ``signals`` has its ``chosen_prob``), routed as the
    next boundary's: a pause there happens when ``generated`` tokens exist."""
    decisions = evaluate(generation, "after_token", signals, generated, new_text_start)
    return generation.policies.route(decisions, generated, generation.text, may_roll_back)


def evaluate(
    generation: Generation, phase: str, signals: Signals, generated: int, new_text_start: int
) -> list[Decision]:
    """What the generation's ``phase`` policies decide at this step (see StepContext)."""
    ctx = StepContext(
        phase=phase,
        position=generated - (phase == "after_token"),  # after_token: the newest token's index
        signals=signals,
        text=generation.text,
        new_text_start=new_text_start,
        top1_history=generation.top1_history,
        entropy_history=generation.entropy_history,
        similarity_history=generation.similarity_history,
    )
    return generation.policies.evaluate(ctx)


def note_pause(generation: Generation, generated: int, phase: str) -> None:
    """A pause happened when ``generated`` tokens existed: the budget's ledger counts it (a
    manual one only for the distance to the next)."""
    generation.policies.note_pause(generated, policy=phase != "manual")
