"""What the model's next-token distribution says about one decode step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class Alternative:
    """One candidate next token from the top-k of the distribution."""

    token_id: int
    text: str
    prob: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Signals:
    """Summary of one next-token distribution, taken at temperature 1."""

    top1_prob: float  # probability of the most likely next token
    entropy: float  # nats, of the raw (temperature 1) distribution
    margin: float  # top1_prob - top2_prob
    alternatives: tuple[Alternative, ...]  # top-k, best first
    chosen_prob: float | None = None  # probability of the chosen token (None before sampling)

    def to_dict(self) -> dict[str, Any]:
        return {
            "top1_prob": self.top1_prob,
            "entropy": self.entropy,
            "margin": self.margin,
            "alternatives": [a.to_dict() for a in self.alternatives],
            "chosen_prob": self.chosen_prob,
        }


def entropy(probs: np.ndarray, logprobs: np.ndarray) -> float:
    """In nats. A masked token (logit -inf) adds nothing, not 0 * -inf = NaN (as in
    top1_and_entropy); the mask is looked for only when the plain sum, every step's, fails."""
    with np.errstate(invalid="ignore"):
        total = float(-(probs * logprobs).sum())
        if total == total:
            return total
        return float(-(probs * logprobs)[probs > 0].sum())


def summarize(
    logits: torch.Tensor,  # [V] raw next-token logits
    k: int,
    token_text: Callable[[int], str],
) -> tuple[Signals, np.ndarray]:
    """One softmax and one top-k per step. Returns the signals and the log-probs [V].

    numpy on purpose: single-threaded, so these small ops never wait for the thread pool
    the forward pass just used (which costs milliseconds on a busy 2-core machine).
    """
    x = logits.detach().float().numpy()
    shifted = x - x.max()
    exp = np.exp(shifted)
    total = exp.sum()
    logprobs = shifted - np.log(total)
    probs = exp / total
    top = top_ids(x, shifted, max(k, 2))
    top_probs = probs[top].tolist()
    alternatives = tuple(
        Alternative(token_id=int(i), text=token_text(int(i)), prob=p)
        for i, p in zip(top[:k].tolist(), top_probs[:k], strict=True)
    )
    signals = Signals(
        top1_prob=top_probs[0],
        entropy=entropy(probs, logprobs),
        margin=top_probs[0] - top_probs[1],
        alternatives=alternatives,
    )
    return signals, logprobs


NEAR_TOP = -12.0  # logits this far below the best (a 6e-6 ratio) are searched only if needed


def top_ids(x: np.ndarray, shifted: np.ndarray, m: int) -> np.ndarray:
    """The m highest logits' ids, best first. A partition of all 49k ids costs half a
    millisecond; the top lies among the few near the best whenever they are m or more."""
    near = np.flatnonzero(shifted >= NEAR_TOP)
    pool = near if near.size >= m else np.arange(x.size)
    if pool.size > m:
        pool = pool[np.argpartition(-x[pool], m)[:m]]
    return pool[np.argsort(-x[pool], kind="stable")]


def with_chosen(signals: Signals, logprobs: np.ndarray, token_id: int) -> Signals:
    return replace(signals, chosen_prob=float(np.exp(logprobs[token_id])))


def top1_and_entropy(logits: torch.Tensor) -> tuple[list[float], list[float]]:
    """Per row of [T, V] logits: (top1 probability, entropy in nats), batched in torch for
    the histories of many tokens at once (a rebuild, an edit's tail)."""
    logprobs = torch.log_softmax(logits, dim=-1)
    top1: list[float] = logprobs.max(-1).values.exp().tolist()
    entropy: list[float] = (-(logprobs.exp() * logprobs).nan_to_num().sum(-1)).tolist()
    return top1, entropy
