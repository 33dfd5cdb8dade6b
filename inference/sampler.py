"""Draw the next token. Randomness is keyed by (seed, absolute position, attempt).

Keying the generator by position instead of carrying one random stream makes the token
drawn at a position independent of whether, where or how often generation was paused,
and of which process resumed it.
"""

from __future__ import annotations

import hashlib

import torch

from inference.config import SamplingParams

NUCLEUS_CANDIDATES = 1024  # tokens ranked before falling back to sorting the vocabulary


def step_generator(seed: int, position: int, attempt: int) -> torch.Generator:
    digest = hashlib.sha256(f"{seed}:{position}:{attempt}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)


def sample(
    logits: torch.Tensor,  # [V], raw next-token logits
    params: SamplingParams,
    context_ids: torch.Tensor,  # [S] prompt + generated ids, for the repetition penalty
    position: int,
    attempt: int,
) -> int:
    logits = apply_repetition_penalty(logits, context_ids, params.repetition_penalty)
    if params.greedy:  # numpy: single-threaded, see signals.summarize
        return int(logits.detach().float().numpy().argmax())
    probs = filtered_probs(logits / params.temperature, params.top_k, params.top_p)
    gen = step_generator(params.seed, position, attempt)
    return int(torch.multinomial(probs, 1, generator=gen))


def apply_repetition_penalty(
    logits: torch.Tensor, context_ids: torch.Tensor, penalty: float
) -> torch.Tensor:
    """As in transformers: divide positive logits of seen tokens, multiply negative ones."""
    if penalty == 1.0 or context_ids.numel() == 0:
        return logits
    seen = logits.gather(0, context_ids)
    seen = torch.where(seen > 0, seen / penalty, seen * penalty)
    return logits.scatter(0, context_ids, seen)


def filtered_probs(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    if top_k and top_k < logits.numel():
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits.float(), dim=-1)
    if top_p < 1.0:
        probs = nucleus(probs, top_p)
    return probs


def nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest prefix, by probability, whose mass reaches top_p (always at least
    one token). Sorting a whole vocabulary costs milliseconds a token; the most likely
    NUCLEUS_CANDIDATES hold that prefix whenever their mass reaches top_p, and the prefix
    sums are the same numbers either way, so the result is the full sort's."""
    count = min(NUCLEUS_CANDIDATES, probs.numel())
    sorted_probs, order = torch.topk(probs, count)  # descending
    if count < probs.numel() and not float(sorted_probs.cumsum(0)[-1]) >= top_p:
        sorted_probs, order = torch.sort(probs, descending=True)
    drop = (sorted_probs.cumsum(0) - sorted_probs) >= top_p
    sorted_probs = sorted_probs.masked_fill(drop, 0.0)
    return torch.zeros_like(probs).scatter(0, order, sorted_probs)
