"""Weight-only int8 (CAESURA_WEIGHTS=int8): every linear layer's weight as int8 with one float
scale per output channel; activations, norms, embeddings and the KV cache stay float.

A decode step reads every weight once, so on CPU its time is the weights' memory traffic:
int8 reads a quarter of float32's bytes. Every forward of the model (prefill, edits,
look-ahead, the compiled step) uses the same int8 weights, so a run is deterministic within
int8: resuming equals an uninterrupted int8 run. Its tokens may differ from float32's where
two candidates are close; the benchmark prints how often the greedy token agrees.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import torch
from torch import nn

QMAX = 127  # symmetric: -127..127, so that the scale maps the largest weight exactly


class Int8Linear(nn.Module):
    """y = (x @ int8_weight^T) * int8_scales + bias.

    The compiled step reads the int8 rows directly (step_graph.linear); here, for prefills,
    edits and the look-ahead's batches, the weight is widened once per call and multiplied
    as a float matrix: torch's int8 matrix product is slow on CPU for more than one row.
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        weight = linear.weight.detach().float()  # [out, in]
        scales = weight.abs().amax(dim=1).clamp(min=torch.finfo(torch.float32).tiny) / QMAX
        quantized = torch.round(weight / scales[:, None]).clamp(-QMAX, QMAX).to(torch.int8)
        self.int8_weight = nn.Buffer(quantized.contiguous())  # [out, in]
        self.int8_scales = nn.Buffer(scales.to(linear.weight.dtype))  # [out]
        bias = linear.bias
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = _scratch(self.out_features * self.in_features, self.int8_scales)
        weight = weight.view(self.out_features, self.in_features)
        # Widened by a plain copy and scaled per output channel after the product, as the
        # compiled step does: a copy streams the weight several times faster than a product
        # with the scales (the LM head's: 10 ms against 40 on a 2-core machine).
        weight.copy_(self.int8_weight)
        out = nn.functional.linear(x, weight).mul_(self.int8_scales)
        return out if self.bias is None else out.add_(self.bias)


_scratches = threading.local()


def _scratch(size: int, like: torch.Tensor) -> torch.Tensor:
    """A float buffer of at least ``size`` elements, reused by every layer of this thread: a
    fresh one per product would spend more time faulting its pages in than widening."""
    buffer: torch.Tensor | None = getattr(_scratches, "buffer", None)
    if buffer is None or buffer.numel() < size or buffer.dtype != like.dtype:
        buffer = _scratches.buffer = like.new_empty(size)
    elif buffer.device != like.device:
        buffer = _scratches.buffer = like.new_empty(max(size, buffer.numel()))
    return buffer[:size]


def quantize(model: nn.Module) -> None:
    """Replace every nn.Linear of ``model`` (the LM head too) by an Int8Linear, in place.
    A head tied to the embeddings gets its own int8 copy; the embeddings stay float."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, Int8Linear(child))
    config: Any = getattr(model, "config", None)
    if getattr(config, "tie_word_embeddings", False):
        config.tie_word_embeddings = False  # the head is its own now


def digest(model: nn.Module) -> str:
    """A short hash of the int8 weights, empty when there are none (float models keep the
    fingerprint they always had, so their snapshots still load)."""
    found = hashlib.sha256()
    layers = [m for m in model.modules() if isinstance(m, Int8Linear)]
    for layer in layers:
        flat = layer.int8_weight.reshape(-1)
        found.update(flat[:: max(1, flat.numel() // 64)].contiguous().numpy().tobytes())
        found.update(layer.int8_scales.float().contiguous().numpy().tobytes()[:256])
    return found.hexdigest() if layers else ""
