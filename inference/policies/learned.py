"""The learned policy: a trained pause model scores every step and the policy pauses at the
token where the score rises to its threshold, saying which features pushed it there."""

from __future__ import annotations

from inference.learned.pause_features import Step, clause_start, describe, prior_step
from inference.learned.pause_model import PauseModel, PauseModelError, load_model
from inference.message import Message
from inference.policies.base import Decision, Param, Policy, StepContext

REASON_FEATURES = 3


class LearnedPolicy(Policy):
    kind = "learned"
    phase = "after_token"
    PARAMS = (
        Param("model", "string", "Path of the trained pause model file"),
        Param(
            "checksum",
            "string",
            "SHA-256 of the model file; any other file is refused",
            default=None,
            nullable=True,
        ),
        Param(
            "threshold",
            "number",
            "Pause when the predicted chance of an intervention rises to this "
            "(empty: the threshold chosen at training)",
            default=None,
            min=0.0,
            max=1.0,
            nullable=True,
        ),
    )

    def prepare(self) -> None:
        checksum = self.params["checksum"]
        try:
            self.model: PauseModel = load_model(self.params["model"], checksum)
        except PauseModelError as err:
            field = "checksum" if checksum and "checksum" in str(err) else "model"
            raise self.config_error(
                field, Message("cannot be used: %(error)s", error=str(err))
            ) from None
        threshold = self.params["threshold"]
        self.threshold = self.model.threshold if threshold is None else float(threshold)

    def evaluate(self, ctx: StepContext) -> Decision | None:
        step = Step(ctx.text, ctx.new_text_start, ctx.signals.top1_prob, ctx.signals.entropy)
        crossed = self.model.crossing(step, previous_step(ctx), self.threshold)
        if crossed is None:
            return None
        score, found = crossed
        explained = self.model.explain(found, REASON_FEATURES)
        reason = (
            f"A reviewer would likely step in here (score {score:.2f}, threshold "
            f"{self.threshold:.2f}): {PauseModel.reason_text(explained)}"
        )
        evidence = {
            "score": score,
            "threshold": self.threshold,
            "model_checksum": self.model.checksum,
            "features": [
                {"feature": name, "label": describe(name), "contribution": contribution}
                for name, contribution in explained
            ],
        }
        return self.decide(ctx, reason, evidence, span=(clause_start(ctx.text), len(ctx.text)))


def previous_step(ctx: StepContext) -> Step:
    """The step before this one as the model saw it: the text without the newest token,
    with its predecessor's signals."""
    prior = ctx.position - 1
    top1 = ctx.top1_history[prior] if 0 <= prior < len(ctx.top1_history) else None
    entropy = ctx.entropy_history[prior] if 0 <= prior < len(ctx.entropy_history) else None
    return prior_step(ctx.text[: ctx.new_text_start], top1, entropy)
