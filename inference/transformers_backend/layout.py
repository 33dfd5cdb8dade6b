"""The weight layout for CPU decoding: which linear products run which way round.

Same values as transformers loads; only the memory order of some weights and the way a few
rows are multiplied change, for speed on CPU BLAS (the decode step is one row).
"""

from __future__ import annotations

import torch
from torch import nn


class SmallBatchLinear(nn.Linear):
    """nn.Linear that computes a few rows (2..32) as weight @ x^T.

    On CPU a linear over a handful of rows (an edit's tail) with a row-major weight takes
    a general matrix product about twice as slow as the single-row one; weight @ x^T keeps
    the fast path for up to a few dozen rows. One row (a decode step), long inputs (a
    prefill) and column-major weights (see ``lay_out_wide_weights``) are unchanged.
    """

    MAX_ROWS = 32

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // self.in_features
        if not 2 <= rows <= self.MAX_ROWS or not _row_major_on_cpu(self.weight):
            return super().forward(x)
        flat = x.reshape(rows, self.in_features)
        out = torch.matmul(self.weight, flat.t()).t()
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)


def _row_major_on_cpu(weight: torch.Tensor) -> bool:
    return weight.device.type == "cpu" and weight.is_contiguous()


def use_small_batch_linear(model: nn.Module) -> None:
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = SmallBatchLinear  # same parameters, tied weights stay tied


def lay_out_wide_weights(model: nn.Module) -> None:
    """Store wide CPU weights (more outputs than inputs: the MLP's gate and up projections,
    the LM head) column-major. Same values; for the one-row product of a decode step CPU
    BLAS streams this layout about 1.5x faster, and long prefills run as fast as before."""
    for module in model.modules():
        if not isinstance(module, nn.Linear):
            continue
        if module.out_features > module.in_features and _row_major_on_cpu(module.weight):
            module.weight.data = module.weight.data.t().contiguous().t()
