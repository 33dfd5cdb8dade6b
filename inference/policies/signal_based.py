"""Policies over the model's signals: low confidence, high entropy, overconfidence
(a confident token right after an absolute word) and drift (a rollback when the text
wanders from the prompt)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from inference.message import Message
from inference.policies.base import DEFAULT_ABSOLUTE_WORDS, Decision, Param, Policy, StepContext
from inference.policies.text import literal_pattern, matched_word_index, text_evidence

MAX_REASON_DIGITS = 6

# The rollback protocol's defaults per task type (the design's §5.3): mean entropy over a
# window of 3 tokens and similarity to the prompt 0.4, with the entropy line lower where the
# answer is fixed and higher for open writing, where some wandering is the point.
DRIFT_PRESETS: dict[str, dict[str, Any]] = {
    "deterministic": {"entropy_threshold": 1.5, "similarity_threshold": 0.4, "window": 3},
    "reasoning": {"entropy_threshold": 2.1, "similarity_threshold": 0.4, "window": 3},
    "open": {"entropy_threshold": 2.8, "similarity_threshold": 0.4, "window": 3},
}


def distinct(value: float, threshold: float) -> tuple[str, str]:
    """Both numbers with two decimals, or with as many more as it takes to tell them apart,
    so that a reason never reads "0.35 is below 0.35"; past six, their shortest exact form."""
    for digits in range(2, MAX_REASON_DIGITS + 1):
        shown, limit = f"{value:.{digits}f}", f"{threshold:.{digits}f}"
        if shown != limit:
            return shown, limit
    return repr(float(value)), repr(float(threshold))


class LowConfidencePolicy(Policy):
    kind = "low_confidence"
    phase = "before_token"
    PARAMS = (
        Param(
            "threshold",
            "number",
            "Pause when the top-1 probability is below this",
            default=0.35,
            min=0.0,
            max=1.0,
        ),
    )

    def evaluate(self, ctx: StepContext) -> Decision | None:
        top1, threshold = ctx.signals.top1_prob, self.params["threshold"]
        if top1 >= threshold:
            return None
        shown, limit = distinct(top1, threshold)
        reason = f"Top-1 probability {shown} is below {limit}"
        return self.decide(ctx, reason, {"top1_prob": top1, "threshold": threshold})


class HighEntropyPolicy(Policy):
    kind = "high_entropy"
    phase = "before_token"
    PARAMS = (
        Param(
            "threshold",
            "number",
            "Pause when the entropy (nats) is above this",
            default=2.5,
            min=0.0,
            exclusive_min=True,
        ),
    )

    def evaluate(self, ctx: StepContext) -> Decision | None:
        entropy, threshold = ctx.signals.entropy, self.params["threshold"]
        if entropy <= threshold:
            return None
        shown, limit = distinct(entropy, threshold)
        reason = f"Entropy {shown} nats is above {limit}"
        return self.decide(ctx, reason, {"entropy": entropy, "threshold": threshold})


class OverconfidencePolicy(Policy):
    """Confident tokens near absolute wording: fires once per absolute word."""

    kind = "overconfidence"
    phase = "after_token"
    PARAMS = (
        Param(
            "threshold",
            "number",
            "Top-1 probability above which a token counts as confident",
            default=0.92,
            min=0.0,
            max=1.0,
        ),
        Param(
            "words", "string_list", "Absolute wording to look for", default=DEFAULT_ABSOLUTE_WORDS
        ),
        Param(
            "window_chars",
            "integer",
            "How many recent characters to search for absolute wording",
            default=200,
            min=1,
            max=10000,
        ),
    )

    def prepare(self) -> None:
        words = self.params["words"]
        if any(not word.strip() for word in words):
            raise self.config_error("words", Message("must not contain blank entries"))
        self.params["words"] = [word.strip() for word in words]
        self.compiled = literal_pattern(self.params["words"], False, True)

    def evaluate(self, ctx: StepContext) -> Decision | None:
        top1, threshold = ctx.signals.top1_prob, self.params["threshold"]
        if top1 <= threshold:
            return None
        window_start = max(0, len(ctx.text) - self.params["window_chars"])
        found = list(self.compiled.finditer(ctx.text, window_start))
        if not found:
            return None
        match = found[-1]  # the newest absolute word; older ones have had their chance
        word = self.params["words"][matched_word_index(match)]
        evidence = {**text_evidence(match), "word": word, "top1_prob": top1, "threshold": threshold}
        shown, limit = distinct(top1, threshold)
        reason = f'Top-1 probability {shown} above {limit} right after "{match.group()}"'
        return self.decide(ctx, reason, evidence, span=(match.start(), match.end()))


class DriftPolicy(Policy):
    """Rolls back when the text wanders: uncertain and unlike the prompt over a window."""

    kind = "drift"
    phase = "after_token"
    needs_hidden_states = True
    actions = ("rollback", "pause", "flag")
    default_action = "rollback"
    PARAMS = (
        Param("window", "integer", "Number of recent tokens averaged", default=8, min=1, max=512),
        Param(
            "entropy_threshold",
            "number",
            "Mean entropy (nats) above which the window is uncertain",
            default=2.5,
            min=0.0,
            exclusive_min=True,
        ),
        Param(
            "similarity_threshold",
            "number",
            "Mean cosine similarity to the prompt below which the window drifted",
            default=0.5,
            min=-1.0,
            max=1.0,
        ),
        Param(
            "confidence_floor",
            "number",
            "Roll back to just after the last token more confident than this",
            default=0.5,
            min=0.0,
            max=1.0,
        ),
        Param(
            "by_task_type",
            "boolean",
            "Take the window and both thresholds from the session's task type",
            default=False,
        ),
    )

    def evaluate(self, ctx: StepContext) -> Decision | None:
        now = self.window_means(ctx, ctx.position)
        if now is None or not self.drifted(*now):
            return None
        previous = self.window_means(ctx, ctx.position - 1)
        if previous is not None and self.drifted(*previous):
            return None  # fire once, at the token where the drift began
        window_start = ctx.position - self.params["window"] + 1
        rollback_to = self.rollback_point(ctx.top1_history, window_start)
        evidence = self.drift_evidence(now, window_start, ctx.position, rollback_to)
        reason = (
            f"Drift over tokens {window_start}-{ctx.position}: mean entropy {now[0]:.2f}, "
            f"similarity to prompt {now[1]:.2f}"
        )
        keep = rollback_to if self.action == "rollback" else None
        return self.decide(ctx, reason, evidence, rollback_to=keep)

    def window_means(self, ctx: StepContext, last: int) -> tuple[float, float] | None:
        """(mean entropy, mean similarity) of the window ending at `last`, if all known."""
        first = last - self.params["window"] + 1
        if first < 0 or last >= len(ctx.entropy_history) or last >= len(ctx.similarity_history):
            return None
        similarities = [s for s in ctx.similarity_history[first : last + 1] if s is not None]
        if len(similarities) != last + 1 - first:  # some were not computed
            return None
        entropies = ctx.entropy_history[first : last + 1]
        return math.fsum(entropies) / len(entropies), math.fsum(similarities) / len(similarities)

    def drifted(self, mean_entropy: float, mean_similarity: float) -> bool:
        return bool(
            mean_entropy > self.params["entropy_threshold"]
            and mean_similarity < self.params["similarity_threshold"]
        )

    def rollback_point(self, top1_history: Sequence[float], window_start: int) -> int:
        """One past the last token before the window more confident than the floor; else 0."""
        for i in range(min(window_start, len(top1_history)) - 1, -1, -1):
            if top1_history[i] > self.params["confidence_floor"]:
                return i + 1
        return 0

    def drift_evidence(
        self, means: tuple[float, float], start: int, end: int, rollback_to: int
    ) -> dict[str, Any]:
        return {
            "mean_entropy": means[0],
            "mean_similarity": means[1],
            "window": [start, end],
            "rollback_to": rollback_to,
            "entropy_threshold": self.params["entropy_threshold"],
            "similarity_threshold": self.params["similarity_threshold"],
            "confidence_floor": self.params["confidence_floor"],
        }


def with_task_presets(specs: list[dict[str, Any]], task_type: str) -> list[dict[str, Any]]:
    """The specs with every drift policy that says "by task type" given that task type's
    window and thresholds (a session's copy, made when it starts: what ran is what is kept)."""
    preset = DRIFT_PRESETS.get(task_type)
    return [
        {**spec, "params": {**spec.get("params", {}), **preset}}
        if preset is not None and is_by_task_type(spec)
        else spec
        for spec in specs
    ]


def is_by_task_type(spec: dict[str, Any]) -> bool:
    params = spec.get("params")
    return (
        spec.get("kind") == DriftPolicy.kind
        and isinstance(params, dict)
        and params.get("by_task_type") is True
    )
