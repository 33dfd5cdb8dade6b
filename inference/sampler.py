"""Draw the next token. Randomness is keyed by (seed, absolute position, attempt).

Keying the draw by position instead of carrying one random stream makes the token drawn
at a position independent of whether, where or how often generation was paused, and of
which process (or backend) resumed it.

The draw is an inverse-CDF pick among the candidates the filters leave, ranked most
likely first, with one uniform number taken from a hash of the key. It never touches the
rest of the vocabulary (a multinomial over all 49k probabilities cost 1.2-1.7 ms a token,
most of a batched vLLM step's own work), and it depends on no library's random stream.
numpy on purpose: single-threaded, so these small ops never wait for the thread pool the
forward pass just used.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from inference.config import SamplingParams


def step_uniform(seed: int, position: int, attempt: int) -> float:
    """A number in [0, 1), fixed by the key: 53 bits of its SHA-256."""
    digest = hashlib.sha256(f"{seed}:{position}:{attempt}".encode()).digest()
    return (int.from_bytes(digest[:8], "little") >> 11) * 2.0**-53


def sample(
    logits: torch.Tensor,  # [V], raw next-token logits
    params: SamplingParams,
    context_ids: torch.Tensor,  # [S] prompt + generated ids, for the repetition penalty
    position: int,
    attempt: int,
) -> int:
    x = logits.detach().float().numpy()
    x = apply_repetition_penalty(x, context_ids.numpy(), params.repetition_penalty)
    if params.greedy:
        return int(x.argmax())
    ids, probs = candidates(x / params.temperature, params.top_k, params.top_p)
    return draw(ids, probs, step_uniform(params.seed, position, attempt))


def apply_repetition_penalty(
    logits: np.ndarray, context_ids: np.ndarray, penalty: float
) -> np.ndarray:
    """As in transformers: divide positive logits of seen tokens, multiply negative ones (the
    same float32 operations, so the same bits). On a copy: ``logits`` may be the model's own
    row. In numpy, since torch spread this vocabulary-wide scatter over its thread pool: 0.8 ms
    a token in the worker, against 34 us alone (16 us in numpy)."""
    if penalty == 1.0 or context_ids.size == 0:
        return logits
    penalized = logits.copy()
    seen = penalized[context_ids]
    penalized[context_ids] = np.where(seen > 0, seen / penalty, seen * penalty)
    return penalized


def candidates(scaled: np.ndarray, top_k: int, top_p: float) -> tuple[np.ndarray, np.ndarray]:
    """The tokens a draw can pick and their probabilities (over the top-k, not
    renormalized to the nucleus). With top_p < 1 they are the nucleus, most likely first
    (ties: lower id first); otherwise every top-k token, in id order."""
    ids = top_k_ids(scaled, top_k)
    kept = (scaled if ids is None else scaled[ids]).astype(np.float64)
    exp = np.exp(kept - kept.max())
    probs = exp / exp.sum()
    ranked = nucleus(probs, top_p) if top_p < 1.0 else None
    if ranked is not None:
        probs = probs[ranked]
        ids = ranked if ids is None else ids[ranked]
    return (np.arange(scaled.size) if ids is None else ids), probs


def top_k_ids(scaled: np.ndarray, top_k: int) -> np.ndarray | None:
    """Ids of the top_k highest logits (ties at the k-th kept too); None when off."""
    if not top_k or top_k >= scaled.size:
        return None
    kth = np.partition(scaled, scaled.size - top_k)[scaled.size - top_k]
    return np.flatnonzero(scaled >= kth)


def nucleus(probs: np.ndarray, top_p: float) -> np.ndarray:
    """Indices of the smallest prefix, by probability, whose mass reaches top_p (always
    at least one token), most likely first. Tokens under (1 - top_p) / V each hold less
    than 1 - top_p together, so the prefix lies among the others: only they are sorted."""
    above = np.flatnonzero(probs >= (1.0 - top_p) / probs.size)
    ranked = above[np.argsort(-probs[above], kind="stable")]
    mass_before = np.cumsum(probs[ranked]) - probs[ranked]
    return ranked[: max(1, int(np.searchsorted(mass_before, top_p, side="left")))]


def draw(ids: np.ndarray, probs: np.ndarray, u: float) -> int:
    """The candidate whose share of the cumulative mass holds u."""
    cumulative = np.cumsum(probs)
    index = int(np.searchsorted(cumulative, u * cumulative[-1], side="right"))
    if index >= ids.size:  # u * total rounded up to the total: the last that can be drawn
        index = int(np.flatnonzero(probs)[-1])
    return int(ids[index])
