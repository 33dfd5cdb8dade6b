"""The sentence_count policy: a pause after every N complete sentences."""

from __future__ import annotations

from bisect import bisect_left

from inference.policies.base import Decision, Param, Policy, StepContext
from inference.sentences import SentenceTracker


class SentenceCountPolicy(Policy):
    """Pauses after every N complete sentences; see inference.sentences for the rule."""

    kind = "sentence_count"
    phase = "after_token"
    text_only = True
    PARAMS = (
        Param("every", "integer", "Pause after every this many complete sentences", min=1),
        Param(
            "max_pauses",
            "integer",
            "Stop pausing after this many pauses (empty: no limit)",
            default=None,
            min=1,
            nullable=True,
        ),
    )

    def prepare(self) -> None:
        self.tracker = SentenceTracker()  # a cache; decisions depend on ctx alone

    def evaluate(self, ctx: StepContext) -> Decision | None:
        sentences = self.tracker.complete_sentences(ctx.text)
        # Confirmation offsets only grow, sentence by sentence.
        before = bisect_left(sentences, ctx.new_text_start, key=lambda s: s.confirmed_at)
        every, limit = self.params["every"], self.params["max_pauses"]
        nth = len(sentences) // every
        if nth == before // every or (limit is not None and nth > limit):
            return None
        last = sentences[nth * every - 1]
        evidence = {
            "sentences": nth * every,
            "pause_number": nth,
            "sentence": ctx.text[last.start : last.end],
            "start": last.start,
            "end": last.end,
        }
        reason = f"{nth * every} complete sentence{'s' if nth * every != 1 else ''}"
        return self.decide(ctx, reason, evidence, span=(last.start, last.end))
