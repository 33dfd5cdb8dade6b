"""Gated attention for one forward: each query row past the prompt attends only to the
positions inference/gating.py's rule keeps (sinks, window, anchors, heavy hitters).

A single-token step gathers the kept positions' scores and values, so the softmax and the
weighted sum run over a few dozen positions instead of the whole context. A multi-token
forward (an edit's tail, a note, a rebuild) applies the same selection row by row as a
mask, so a position comes out the same whichever path computed it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from inference.gating import GateConfig

FULL = -1  # a row's top_k for full (causal) attention: the prompt's rows
ROW_CHUNK = 256  # query rows per masked block (bounds the [H, rows, S] scores)


@dataclass
class Capture:
    """One layer's selection at a single-token step, for the view at a pause."""

    layer: int
    kept: torch.Tensor  # [Hkv, n] positions
    probs: torch.Tensor  # [Hq, S] full softmax, for the mass the kept positions hold


@dataclass
class GatePlan:
    """What one forward needs to gate its rows, and what its single-token step measured."""

    config: GateConfig
    anchors: torch.Tensor  # [A] context positions always kept
    first: int  # context position of the forward's first query row
    top_ks: list[int]  # per query row of the forward: k heavy hitters, or FULL
    measure: bool = False  # compute the hit rate (the full softmax) at this step
    capture: list[Capture] | None = None  # keep every layer's selection (a pause's view)
    hit_rates: list[float] = field(default_factory=list)  # per layer, when measured
    kept: int = 0  # positions a head attended to, at the last single-token step
    fixed: dict[int, torch.Tensor] = field(default_factory=dict)  # by length: every layer's

    def fixed_at(self, length: int) -> torch.Tensor:
        """fixed_positions for ``length``, computed once for all the forward's layers."""
        if length not in self.fixed:
            self.fixed[length] = fixed_positions(length, self.config, self.anchors)
        return self.fixed[length]

    @property
    def gates(self) -> bool:
        return any(k != FULL for k in self.top_ks)


def attend(
    plan: GatePlan,
    layer: int,
    query: torch.Tensor,  # [1, Hq, M, D]
    key: torch.Tensor,  # [1, Hkv, S, D]
    value: torch.Tensor,  # [1, Hkv, S, D]
    scaling: float,
) -> torch.Tensor:
    """The attention output [1, M, Hq, D] (transformers' layout after attention)."""
    heads, rows, dim = query.shape[1], query.shape[2], query.shape[3]
    kv_heads = key.shape[1]
    grouped = query[0].reshape(kv_heads, heads // kv_heads, rows, dim)  # [Hkv, G, M, D]
    if rows == 1:
        out = _single(plan, layer, grouped[:, :, 0], key[0], value[0], scaling)
        return out.reshape(1, 1, heads, dim)
    start = key.shape[2] - rows
    parts = [
        _masked(plan, grouped[:, :, lo : lo + ROW_CHUNK], key[0], value[0], scaling, start + lo)
        for lo in range(0, rows, ROW_CHUNK)
    ]
    out = torch.cat(parts, dim=2)  # [Hkv, G, M, D]
    return out.reshape(heads, rows, dim).transpose(0, 1).unsqueeze(0)


def fixed_positions(length: int, config: GateConfig, anchors: torch.Tensor) -> torch.Tensor:
    """[length] bool: the sinks, the window ending at the query (position length - 1) and
    the anchors among the first ``length`` positions."""
    where = torch.arange(length)
    fixed = (where < config.sinks) | (where >= length - config.window)
    inside = anchors[anchors < length]
    fixed[inside] = True
    return fixed


def select(
    mass: torch.Tensor, fixed: torch.Tensor, top_k: int
) -> torch.Tensor | None:  # mass: [Hkv, S]; fixed: [S]
    """Kept positions per KV head, [Hkv, n]; None when that is every position."""
    eligible = int(fixed.numel() - fixed.sum())
    if top_k >= eligible:
        return None
    heavy = mass.masked_fill(fixed, float("-inf")).topk(top_k, dim=-1).indices  # [Hkv, k]
    always = fixed.nonzero().squeeze(1).expand(mass.shape[0], -1)  # [Hkv, F]
    return torch.cat([always, heavy], dim=-1)  # unsorted: the sums do not depend on order


def _single(
    plan: GatePlan,
    layer: int,
    query: torch.Tensor,  # [Hkv, G, D]
    key: torch.Tensor,  # [Hkv, S, D]
    value: torch.Tensor,  # [Hkv, S, D]
    scaling: float,
) -> torch.Tensor:  # [Hkv, G, D]
    length = key.shape[1]
    scores = torch.matmul(query * scaling, key.transpose(1, 2))  # [Hkv, G, S]
    probs = torch.softmax(scores, dim=-1)
    kept = select(probs.sum(1), plan.fixed_at(length), plan.top_ks[0])
    if kept is None:
        kept = torch.arange(length).expand(key.shape[0], -1)
    plan.kept = kept.shape[1]
    groups = scores.shape[1]
    picked = kept[:, None, :].expand(-1, groups, -1)  # [Hkv, G, n]
    if plan.measure:
        plan.hit_rates.append(float(probs.gather(-1, picked).sum(-1).mean()))
    if plan.capture is not None:
        plan.capture.append(Capture(layer, kept, probs.reshape(-1, length)))
    weights = torch.softmax(scores.gather(-1, picked), dim=-1)  # [Hkv, G, n]
    rows = value.gather(1, kept[..., None].expand(-1, -1, value.shape[-1]))  # [Hkv, n, D]
    return torch.matmul(weights, rows)


def _masked(
    plan: GatePlan,
    query: torch.Tensor,  # [Hkv, G, R, D]: rows start..start+R of the context
    key: torch.Tensor,  # [Hkv, S, D]
    value: torch.Tensor,  # [Hkv, S, D]
    scaling: float,
    start: int,
) -> torch.Tensor:  # [Hkv, G, R, D]
    rows, length = query.shape[2], key.shape[1]
    scores = torch.matmul(query * scaling, key[:, None].transpose(2, 3))  # [Hkv, G, R, S]
    causal = torch.arange(length)[None, :] <= torch.arange(start, start + rows)[:, None]  # [R, S]
    scores = scores.masked_fill(~causal, float("-inf"))
    keep = causal.expand(key.shape[0], -1, -1).clone()  # [Hkv, R, S]
    probs = torch.softmax(scores, dim=-1).sum(1)  # [Hkv, R, S]
    for row in range(rows):
        top_k = plan.top_ks[start + row - plan.first]
        if top_k == FULL:
            continue
        position = start + row
        kept = select(probs[:, row, : position + 1], plan.fixed_at(position + 1), top_k)
        if kept is not None:
            keep[:, row] = False
            keep[:, row].scatter_(-1, kept, True)
    scores = scores.masked_fill(~keep[:, None], float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), value[:, None])
