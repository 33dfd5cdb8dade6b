"""The engine's attention function: transformers' sdpa, plus a side copy of the attention row
for live attention, grouped-query attention without copies for masked forwards on CPU, and
gated attention (gated_attention.py) while a gated state's forward runs.
Registered with transformers as ENGINE_ATTENTION; the model runner switches models to it."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from inference.transformers_backend import gated_attention
from inference.transformers_backend.gated_attention import GatePlan

ENGINE_ATTENTION = "caesura_sdpa"


class AttentionRecorder:
    """Captures, for a single-query forward, the query's attention scores per layer.

    Only one product per layer during the forward; the softmax and the means over heads
    and layers run once per token, batched over layers, in ``mean_row``.
    """

    def __init__(self, layers: set[int] | None) -> None:
        self.layers = layers  # None: all layers
        self.scores: list[torch.Tensor] = []  # per recorded layer: [Hq, S], before softmax
        self.scalings: list[float] = []
        self.probs: torch.Tensor | None = None  # [L', Hq, S] from a compiled step, after softmax

    def record(
        self, module: nn.Module, query: torch.Tensor, key: torch.Tensor, scaling: float
    ) -> None:
        layer = getattr(module, "layer_idx", None)
        if query.shape[2] != 1 or (self.layers is not None and layer not in self.layers):
            return
        # query: [1, Hq, 1, D]; key: [1, Hkv, S, D]. Group the query heads by their shared
        # KV head instead of repeating the keys (no copy of the cache).
        heads, kv_heads, dim = query.shape[1], key.shape[1], query.shape[-1]
        grouped = query.reshape(kv_heads, heads // kv_heads, dim)  # [Hkv, G, D]
        self.scores.append(torch.matmul(grouped, key[0].transpose(1, 2)).reshape(heads, -1))
        self.scalings.append(scaling)

    def take(self, rows: torch.Tensor, length: int) -> None:
        """A compiled step's probabilities, rows [L, Hq, C] over a capacity C >= length."""
        chosen = rows if self.layers is None else rows[sorted(self.layers)]
        self.probs = chosen[..., :length]

    def mean_row(self) -> torch.Tensor | None:
        """The newest token's attention over the context, [S]: softmax per head, then the
        mean over heads and recorded layers. Clears what was recorded."""
        if self.probs is not None:
            probs, self.probs = self.probs, None
            return probs.float().mean((0, 1))
        if not self.scores:
            return None
        scores = torch.stack(self.scores).float()  # [L, Hq, S]
        scaling = torch.tensor(self.scalings, dtype=scores.dtype)[:, None, None]
        self.scores, self.scalings = [], []
        return torch.softmax(scores * scaling, dim=-1).mean((0, 1))


recorder: AttentionRecorder | None = None  # set while a live run steps (runner.py)
gate_plan: GatePlan | None = None  # set while a gated state's forward runs (runner.py)


def _engine_sdpa(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """transformers' sdpa, plus a side copy of the attention row when recording, and
    grouped-query attention without copies for masked forwards on CPU."""
    if recorder is not None:
        recorder.record(module, query, key, scaling or query.shape[-1] ** -0.5)
    if gate_plan is not None and gate_plan.gates and query.shape[0] == 1:
        layer = int(getattr(module, "layer_idx", 0))
        scale = scaling or query.shape[-1] ** -0.5
        return gated_attention.attend(gate_plan, layer, query, key, value, scale), None
    if attention_mask is not None and _grouped_with_mask(module, query, attention_mask, kwargs):
        return _grouped_query_sdpa(query, key, value, attention_mask, scaling), None
    return sdpa_attention_forward(
        module, query, key, value, attention_mask, scaling=scaling, **kwargs
    )


def _grouped_with_mask(
    module: nn.Module,
    query: torch.Tensor,
    attention_mask: torch.Tensor,
    kwargs: dict[str, Any],
) -> bool:
    return (
        query.device.type == "cpu"
        and getattr(module, "num_key_value_groups", 1) > 1
        and not module.training
        and kwargs.get("position_bias") is None
        and kwargs.get("cache") is None
        and attention_mask.shape[0] == 1
        and attention_mask.shape[1] == 1
    )


def _grouped_query_sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor,
    scaling: float | None,
) -> torch.Tensor:
    """Masked attention for several new tokens after cached ones, without repeating K/V.

    With a mask, transformers repeats keys and values per query head (a copy of the whole
    cache in every layer) and CPU sdpa has no fast grouped path. Instead the query heads
    that share a KV head become extra query rows of that head: [1, Hkv, G*M, D] against
    [1, Hkv, S, D], the mask repeated per group. The same sums, up to float rounding.
    """
    batch, heads, rows, dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    grouped = query.reshape(batch, kv_heads, group * rows, dim)
    mask = mask.expand(batch, 1, rows, mask.shape[-1]).repeat(1, 1, group, 1)
    out = nn.functional.scaled_dot_product_attention(
        grouped, key, value, attn_mask=mask, scale=scaling
    )  # [B, Hkv, G*M, D]
    return out.reshape(batch, heads, rows, dim).transpose(1, 2).contiguous()


AttentionInterface.register(ENGINE_ATTENTION, _engine_sdpa)
AttentionMaskInterface.register(ENGINE_ATTENTION, sdpa_mask)  # same masks as sdpa
