"""A gated state's gate, kept beside its KV cache: what every forward over that cache needs
to gate its rows (inference/gating.py's rule), and what the last step measured.

It mirrors the context ids the cache covers: a forward writes its ids at the cache's length,
which a crop (edit, rollback) has already moved, so ``ids[:start] + new ids`` is always the
context. The ids decide each row's top_k (a trigger in the recent generated text widens it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from inference.gating import TRIGGER_TOKENS, AnchorSpan, GateConfig
from inference.transformers_backend.gated_attention import FULL, Capture, GatePlan

MEASURE_EVERY = 16  # the hit rate (a full softmax per layer) is computed at these positions


@dataclass
class Gate:
    config: GateConfig
    prompt_length: int  # rows before it (the prompt) run full attention
    anchors: torch.Tensor  # [A] context positions
    decode: Callable[[list[int]], str]  # ids -> text, for the trigger words
    ids: list[int] = field(default_factory=list)  # the context ids the cache covers
    kept: int = 0  # the last single-token step's kept positions per head
    hit_rate: float | None = None  # its share of the full attention mass, when measured
    measure_every: int = MEASURE_EVERY  # positions between two measured hit rates
    capture: bool = False  # keep every layer's selection of each step (tests, the bench)
    captured: list[Capture] = field(default_factory=list)  # the last step's, when capturing

    def plan(self, start: int, new_ids: Sequence[int]) -> GatePlan:
        """The plan of a forward writing ``new_ids`` at position ``start``."""
        self.ids[start:] = list(new_ids)
        top_ks = [self.top_k_at(start + i) for i in range(len(new_ids))]
        single = len(new_ids) == 1
        measure = single and start % self.measure_every == 0
        capture: list[Capture] | None = [] if single and self.capture else None
        return GatePlan(self.config, self.anchors, start, top_ks, measure, capture)

    def top_k_at(self, position: int) -> int:
        """FULL inside the prompt; else top_k, widened by a trigger in the text of the last
        TRIGGER_TOKENS positions after the prompt, up to and including this one: the step
        whose query is a trigger word's last token is the first wide one."""
        if position < self.prompt_length:
            return FULL
        recent = self.ids[max(self.prompt_length, position + 1 - TRIGGER_TOKENS) : position + 1]
        return self.config.top_k_for(self.decode(recent))

    def took(self, plan: GatePlan) -> None:
        """Keep what a single-token step measured."""
        self.kept = plan.kept
        self.captured = plan.capture or []
        self.hit_rate = sum(plan.hit_rates) / len(plan.hit_rates) if plan.hit_rates else None

    def nbytes(self) -> int:
        """Memory the gate holds: its anchors and the ids it mirrors (a pointer each)."""
        return self.anchors.numel() * self.anchors.element_size() + 8 * len(self.ids)


def anchor_positions(anchors: Sequence[AnchorSpan]) -> torch.Tensor:
    spans = [torch.arange(a.start, a.end) for a in anchors]
    return torch.cat(spans) if spans else torch.empty(0, dtype=torch.long)


def attach(cache: Any, gate: Gate | None) -> None:
    """Gate every later forward over ``cache`` (None: full attention)."""
    cache.gate = gate


def of(cache: Any) -> Gate | None:
    gate: Gate | None = getattr(cache, "gate", None)
    return gate
