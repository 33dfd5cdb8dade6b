"""Helpers of the pause-policy tests: steps, signals and specs built in one line."""

from __future__ import annotations

from inference.policies import (
    Decision,
    PolicySet,
    StepContext,
)
from inference.signals import Alternative, Signals


def signals(top1: float = 0.5, entropy: float = 1.0, chosen: float | None = None) -> Signals:
    alternatives = (Alternative(1, "a", top1), Alternative(2, "b", (1 - top1) / 2))
    return Signals(top1, entropy, top1 - (1 - top1) / 2, alternatives, chosen)


def step(text: str, new_text_start: int, position: int = 0, top1: float = 0.5) -> StepContext:
    return StepContext(
        phase="after_token",
        position=position,
        signals=signals(top1, chosen=top1),
        text=text,
        new_text_start=new_text_start,
        top1_history=[top1] * (position + 1),
        entropy_history=[1.0] * (position + 1),
        similarity_history=[0.9] * (position + 1),
    )


def before(top1: float = 0.5, entropy: float = 1.0, position: int = 0) -> StepContext:
    return StepContext(
        phase="before_token",
        position=position,
        signals=signals(top1, entropy),
        text="",
        new_text_start=0,
        top1_history=[0.9] * position,
        entropy_history=[1.0] * position,
        similarity_history=[0.9] * position,
    )


def feed(specs: list[dict], chunks: list[str], top1: float = 0.5) -> list[tuple[int, Decision]]:
    """Feed chunks as tokens through a PolicySet; (position, decision) for every firing."""
    policies = PolicySet.from_specs(specs)
    fired = []
    text = ""
    for position, chunk in enumerate(chunks):
        ctx = step(text + chunk, len(text), position, top1)
        fired += [(position, d) for d in policies.evaluate(ctx)]
        text += chunk
    return fired


def keyword(*words: str, **params) -> dict:
    return {"name": "kw", "kind": "keyword", "params": {"keywords": list(words), **params}}


def sentences(every: int = 1, max_pauses: int | None = None) -> dict:
    params = {"every": every, "max_pauses": max_pauses}
    return {"name": "sentences", "kind": "sentence_count", "params": params}


def positions(fired: list[tuple[int, Decision]]) -> list[int]:
    return [position for position, _ in fired]


def overconfidence() -> dict:
    return {"name": "sure", "kind": "overconfidence"}


def tool_call() -> dict:
    return {"name": "tool", "kind": "tool_call"}
