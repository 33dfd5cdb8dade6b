"""The decode step as one graph: one token through a Llama-style model over a static KV cache.

Written as a plain function of tensors (weights, rotary tables, the cache, the token and its
position), so ``torch.compile`` turns the whole step into one graph and guards only on
shapes: every model of one shape shares the compiled code. The function never mutates its
inputs: it returns the new token's keys and values, and the caller writes them into the
cache after the step. That keeps the graph free of side effects, which a CUDA graph needs
to be replayed (inference/transformers_backend/compiled.py chooses the mode).

Shapes: L layers, Hq query heads, Hkv KV heads (G = Hq / Hkv per group), D head size,
C cache capacity, H hidden size, V vocabulary.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import nn

Linear = dict[str, torch.Tensor]  # "w": [out, in] row-major, or "q": int8 + "s": scales
Layer = dict[str, Any]  # norms and linears of one decoder layer


class Dims(NamedTuple):
    heads: int  # Hq
    kv_heads: int  # Hkv
    head_dim: int  # D
    eps: float  # RMSNorm epsilon
    scaling: float  # attention scale, D ** -0.5 for Llama


class Weights(NamedTuple):
    embed: torch.Tensor  # [V, H]
    layers: list[Layer]
    norm: torch.Tensor  # [H]
    head: Linear  # [V, H]
    cos: torch.Tensor  # [P, D] rotary tables for every position the model knows
    sin: torch.Tensor


class StepOut(NamedTuple):
    logits: torch.Tensor  # [1, V] float32
    hidden: torch.Tensor  # [1, H] last-layer hidden state after the final norm
    rows: torch.Tensor  # [L, Hq, C] attention probabilities of the new token over the cache
    new_kv: torch.Tensor  # [L, 2, 1, Hkv, 1, D] the new token's keys and values


def linear(x: torch.Tensor, lin: Linear) -> torch.Tensor:
    """x [1, in] -> [1, out], as a product and a sum over each weight row [out, in] (rows in
    memory order): the compiler fuses them into one pass over the weights, which streams
    them faster than a BLAS matrix product of one row does on CPU. int8 rows are converted
    in that pass and scaled per output channel."""
    quantized = "q" in lin
    out = (x * lin["q"].to(x.dtype)).sum(-1) * lin["s"] if quantized else (x * lin["w"]).sum(-1)
    if "b" in lin:
        out = out + lin["b"]
    return out[None]


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """As LlamaRMSNorm, operation for operation."""
    dtype = x.dtype
    x = x.to(torch.float32)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x.to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding, as transformers' apply_rotary_pos_emb: x [N, D], cos/sin [1, D]."""
    half = x.shape[-1] // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x * cos) + (turned * sin)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cache: torch.Tensor,
    visible: torch.Tensor,
    dims: Dims,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One query over the cached positions plus its own key. q [Hq, D]; k, v [Hkv, D];
    cache [2, 1, Hkv, C, D]; visible [C] (the filled positions). Returns the output [1, Hq*D]
    and the probabilities over the cache [Hq, C] with the new token's own at ``pos`` left out
    (the caller places it)."""
    group = dims.heads // dims.kv_heads
    grouped = q.view(dims.kv_heads, group, 1, dims.head_dim)  # [Hkv, G, 1, D]
    keys, values = cache[0, 0, :, None], cache[1, 0, :, None]  # [Hkv, 1, C, D]
    # Products and sums rather than batched matrix products: fused, one pass over the cache.
    old = (grouped * keys).sum(-1) * dims.scaling  # [Hkv, G, C]
    old = old.masked_fill(~visible, float("-inf"))
    own = (grouped[:, :, 0] * k[:, None, :]).sum(-1, keepdim=True) * dims.scaling  # [Hkv, G, 1]
    probs = torch.softmax(torch.cat((old, own), dim=-1), dim=-1)  # [Hkv, G, C + 1]
    capacity = keys.shape[2]
    out = (probs[..., :capacity, None] * values).sum(-2)  # [Hkv, G, D]
    out = out + probs[..., capacity:] * v[:, None, :]
    return out.reshape(1, dims.heads * dims.head_dim), probs


def decode_step(
    weights: Weights, dims: Dims, cache: torch.Tensor, token: torch.Tensor, pos: torch.Tensor
) -> StepOut:
    """One token after ``pos`` cached positions. cache [L, 2, 1, Hkv, C, D] (read only);
    token, pos: long [1]."""
    x = nn.functional.embedding(token, weights.embed)  # [1, H]
    cos, sin = weights.cos[pos], weights.sin[pos]  # [1, D]
    capacity = cache.shape[4]
    where = torch.arange(capacity, device=cache.device)
    visible = where < pos  # [C]
    rows, new_kv = [], []
    for i, layer in enumerate(weights.layers):
        h = rms_norm(x, layer["input_norm"], dims.eps)
        q = rotate(linear(h, layer["q"]).view(dims.heads, dims.head_dim), cos, sin)
        k = rotate(linear(h, layer["k"]).view(dims.kv_heads, dims.head_dim), cos, sin)
        v = linear(h, layer["v"]).view(dims.kv_heads, dims.head_dim)
        out, probs = attend(q, k, v, cache[i], visible, dims)
        x = x + linear(out, layer["o"])
        h = rms_norm(x, layer["post_norm"], dims.eps)
        x = x + linear(
            nn.functional.silu(linear(h, layer["gate"])) * linear(h, layer["up"]), layer["down"]
        )
        own = probs[..., capacity:]  # [Hkv, G, 1]: the new token's weight on itself
        rows.append(torch.where(where == pos, own, probs[..., :capacity]).reshape(dims.heads, -1))
        new_kv.append(torch.stack((k, v)))  # [2, Hkv, D]
    hidden = rms_norm(x, weights.norm, dims.eps)
    logits = linear(hidden, weights.head).float()
    kv = torch.stack(new_kv)[:, :, None, :, None, :]  # [L, 2, 1, Hkv, 1, D]
    return StepOut(logits, hidden, torch.stack(rows), kv)
