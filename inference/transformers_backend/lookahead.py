"""Look ahead at a pause: for a few candidate next tokens, the words the model would write
after each, greedily, without touching the paused state.

The branches share the frozen KV cache's content but not its memory: each reads a copy,
dropped afterwards. With the compiled decode step each branch runs on its own copy, a token
a forward: the step is several times faster than an eager forward of the whole batch (on a
CPU, about 25 ms against 100 ms here), so the serving loop, which runs a look-ahead a
forward at a time between the sessions' steps, never holds a pause up for longer than one
step. Without it the cache is copied once into a batch of ``len(token_ids)`` rows and every
branch runs in the same eager forward (batch dimension = branches). The state itself
(cache, next_logits, histories, detokenizer) is only read.
"""

from __future__ import annotations

from collections.abc import Collection, Generator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import torch

from inference.text import REPLACEMENT, Tokenizer

if TYPE_CHECKING:
    from inference.state import DecodeState
    from inference.transformers_backend.runner import ModelRunner

LEFT_CONTEXT = 6  # generated tokens decoded before a branch, so its text joins them cleanly


@dataclass(frozen=True)
class Branch:
    token_id: int  # the candidate next token
    ids: list[int]  # the candidate and the greedy tokens after it (stops after an end token)
    text: str  # what those ids add to the text, decoded whole (no partial characters)
    ends: bool  # the branch reached an end-of-sequence token

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def in_slices(
    state: DecodeState,
    runner: ModelRunner,
    tokenizer: Tokenizer,
    token_ids: Sequence[int],
    steps: int,
    eos_ids: Collection[int],
) -> Generator[None, None, list[Branch]]:
    """Each candidate in ``token_ids`` followed by up to ``steps - 1`` greedy tokens, one
    forward at a time: it yields after each (the serving loop steps the sessions in between)
    and returns the branches (``drain`` runs it at once). The state is read again only at
    the end."""
    if not token_ids:
        return []
    if steps < 1:
        raise ValueError(f"steps must be at least 1, not {steps}")
    rows = [[int(t)] for t in token_ids]
    done = [row[-1] in eos_ids for row in rows]
    if steps > 1 and runner.step is not None:
        for row in rows:
            yield from _one_branch(runner, state.cache, row, steps, eos_ids)
    elif steps > 1 and not all(done):
        cache = _fork(runner, state.cache, len(rows))
        current = [row[-1] for row in rows]
        for _ in range(steps - 1):
            logits = runner.forward_batch(current, cache)  # [B, V]
            current = [int(i) for i in torch.argmax(logits, dim=-1)]
            for b, token in enumerate(current):
                if not done[b]:
                    rows[b].append(token)
                    done[b] = token in eos_ids
            if all(done):
                break
            yield
        del cache
    return [_branch(state, tokenizer, row, eos_ids) for row in rows]


def _one_branch(
    runner: ModelRunner, frozen: Any, row: list[int], steps: int, eos_ids: Collection[int]
) -> Generator[None, None, None]:
    """``row`` (its candidate) grown by greedy tokens through the compiled step, on a copy
    of ``frozen``; it yields after each forward."""
    if row[-1] in eos_ids:
        return
    cache = _fork(runner, frozen, 1)
    while len(row) < steps:
        logits = runner.forward([row[-1]], cache).logits[-1]
        row.append(int(torch.argmax(logits)))
        yield
        if row[-1] in eos_ids:
            break


def drain(slices: Generator[None, None, list[Branch]]) -> list[Branch]:
    """Run every slice at once; the branches."""
    while True:
        try:
            next(slices)
        except StopIteration as done:
            return list(done.value)


def _fork(runner: ModelRunner, cache: Any, batch: int) -> Any:
    """A new cache holding ``batch`` copies of ``cache``'s content; ``cache`` is only read."""
    copies = [
        (keys.repeat(batch, 1, 1, 1), values.repeat(batch, 1, 1, 1))  # [B, H_kv, S, D]
        for keys, values in runner.cache_tensors(cache)
    ]
    return runner.cache_from_tensors(copies)


def _branch(
    state: DecodeState, tokenizer: Tokenizer, row: list[int], eos_ids: Collection[int]
) -> Branch:
    ends = row[-1] in eos_ids
    kept = [t for t in row if t not in eos_ids]
    return Branch(row[0], row, _added_text(state, tokenizer, kept), ends)


def _added_text(state: DecodeState, tokenizer: Tokenizer, ids: list[int]) -> str:
    """The text ``ids`` add after the generated text, decoded together with a few tokens
    before them so spacing and multi-byte characters come out as the full text shows them."""
    generated = state.generated_ids[: state.detok.emitted]
    left = generated[-LEFT_CONTEXT:]
    prefix = tokenizer.decode(left, skip_special_tokens=True) if left else ""
    full = tokenizer.decode(left + ids, skip_special_tokens=True)
    pending = state.generated_ids[state.detok.emitted :]  # a character still being completed
    if pending:
        full = tokenizer.decode(left + pending + ids, skip_special_tokens=True)
    added = full[len(prefix) :] if full.startswith(prefix) else full
    return added.rstrip(REPLACEMENT)  # a branch cut inside a character shows what is whole
