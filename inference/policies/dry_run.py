"""A dry run of the text policies over sample text, without a model."""

from __future__ import annotations

from typing import Any

import regex

from inference.policies.base import CJK_SCRIPTS, Decision, StepContext
from inference.policies.budget import PauseBudget
from inference.policies.policy_set import PolicySet
from inference.signals import Signals

_SIMULATED_TOKEN = regex.compile(rf"\s*(?:[{CJK_SCRIPTS}]|[^\W{CJK_SCRIPTS}]+|[^\w\s])|\s+")
_END_OF_SAMPLE = "\n"


def simulated_tokens(text: str) -> list[str]:
    """Split like a tokenizer might: each word with its leading space, CJK characters and
    punctuation marks one at a time."""
    tokens: list[str] = _SIMULATED_TOKEN.findall(text)  # regex's findall is untyped
    return tokens


def scan_text(
    specs: list[dict[str, Any]], text: str, budget: PauseBudget | dict[str, Any] | None = None
) -> list[Decision]:
    """Dry run of the text policies over sample text, for an admin's "try this policy".

    The text is fed in simulated tokens (`simulated_tokens`) through the after_token text
    policies (keyword, regex, sentence_count, tool_call), with cooldowns applied and each
    step routed as in a live run (`PolicySet.route`): at most one pause per token, the
    highest priority first, within the pause `budget`; a pause refused is kept as a flag.
    Returns each step's pause (with any rollback beside it), then its flags. Policies that
    need model signals (low_confidence, high_entropy, overconfidence, drift) are skipped:
    sample text has no distribution. A final newline is fed after the sample so that a
    keyword or sentence at its very end completes; decisions never point past the sample.
    """
    every = PolicySet.from_specs(specs, budget)  # validates all specs, including skipped ones
    policies = PolicySet([p for p in every.policies if p.text_only], every.budget)
    decisions: list[Decision] = []
    fed = ""
    for position, token in enumerate([*simulated_tokens(text), _END_OF_SAMPLE]):
        ctx = text_step(fed + token, len(fed), position)
        found = [d for d in policies.evaluate(ctx) if d.span is None or d.span[1] <= len(text)]
        # as phases.after_token routes it: a pause there happens when position + 1 tokens exist
        routed = policies.route(found, position + 1, ctx.text)
        if routed.pauses:
            policies.note_pause(position + 1, policy=True)
        decisions += [*routed.pauses, *routed.flags]
        fed += token
    return decisions


def text_step(text: str, new_text_start: int, position: int) -> StepContext:
    """An after_token step with neutral signals, for feeding text without a model."""
    neutral = Signals(top1_prob=1.0, entropy=0.0, margin=1.0, alternatives=())
    return StepContext(
        phase="after_token",
        position=position,
        signals=neutral,
        text=text,
        new_text_start=new_text_start,
        top1_history=[1.0] * (position + 1),
        entropy_history=[0.0] * (position + 1),
        similarity_history=[None] * (position + 1),
    )
