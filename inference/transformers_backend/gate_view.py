"""The gate at a pause, for the reviewer: why each context position was attended to at the
last step (sink / window / anchor / heavy hitter / recall), or that it was not looked at."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from inference.transformers_backend import gate as gate_mod
from inference.transformers_backend.gated_attention import Capture, fixed_positions

if TYPE_CHECKING:
    from inference.state import DecodeState
    from inference.transformers_backend.runner import ModelRunner


def gate_view(state: DecodeState, runner: ModelRunner) -> dict[str, Any] | None:
    """The AttentionView's ``gate``: None for full attention."""
    config = state.params.attention
    if not config.gated:
        return None
    total = runner.cache_length(state.cache)
    anchors = [{"name": a.name, "start": a.start, "end": a.end} for a in state.anchors]
    if state.recall:
        return _described("recall", ["recall"] * total, anchors, 1.0, total, total)
    gate = gate_mod.of(state.cache)
    plan = runner.gated_rerun(state.cache, state.context_ids()[-1])
    if gate is None or plan is None or not plan.capture:  # the last position lies in the prompt
        return _described("gated", ["window"] * total, anchors, 1.0, total, total)
    wide = plan.top_ks[0] != config.top_k
    reasons = _reasons(total, gate, plan.capture)
    hit_rate = sum(_mass(c) for c in plan.capture) / len(plan.capture)
    kept = int(plan.capture[0].kept.shape[1])
    return _described("wide" if wide else "gated", reasons, anchors, hit_rate, kept, total)


def _reasons(total: int, gate: gate_mod.Gate, captures: list[Capture]) -> list[str | None]:
    config = gate.config
    where = torch.arange(total)
    sink, window = where < config.sinks, where >= total - config.window
    anchor = fixed_positions(total, config, gate.anchors) & ~sink & ~window
    heavy = torch.zeros(total, dtype=torch.bool)
    for capture in captures:
        heavy[capture.kept.reshape(-1)] = True
    reasons: list[str | None] = []
    for i in range(total):
        if sink[i]:
            reasons.append("sink")
        elif window[i]:
            reasons.append("window")
        elif anchor[i]:
            reasons.append("anchor")
        else:
            reasons.append("heavy" if heavy[i] else None)
    return reasons


def _mass(capture: Capture) -> float:
    """Share of the full attention mass the kept positions hold, mean over query heads."""
    kv_heads, total = capture.kept.shape[0], capture.probs.shape[-1]
    probs = capture.probs.reshape(kv_heads, -1, total)  # [Hkv, G, S]
    picked = capture.kept[:, None, :].expand(-1, probs.shape[1], -1)
    return float(probs.gather(-1, picked).sum(-1).mean())


def _described(
    mode: str, reasons: list[str | None], anchors: list[dict[str, Any]], hit_rate: float,
    kept: int, total: int,
) -> dict[str, Any]:  # fmt: skip
    return {
        "mode": mode, "reasons": reasons, "anchors": anchors,
        "hit_rate": hit_rate, "kept": kept, "total": total,
    }  # fmt: skip
