"""A decode state from a checkpoint record: one prefill over prompt + generated ids.

A new generation is a record with no generated ids. The histories (top1, entropy and
similarity per generated token) come from the record, or are recomputed from the prefill's
last-layer hidden states when the record has none.
"""

from __future__ import annotations

import torch

from inference.policies import PolicySet
from inference.runner import ModelRunner
from inference.signals import top1_and_entropy
from inference.state import CIRCUIT_BREAKER_ROLLBACKS, Checkpoint, DecodeState
from inference.text import Tokenizer

HISTORY_CHUNK = 256  # positions per lm_head pass when recomputing histories


def rebuild(
    runner: ModelRunner,
    tokenizer: Tokenizer,
    record: Checkpoint,
    policy_set: PolicySet,
    record_similarity: bool = False,
) -> DecodeState:
    """The paused state ``record`` describes, decoding with ``policy_set`` (its firing
    state is loaded from the record's). Its tokens' similarity to the prompt is computed
    when a policy reads it (drift) or ``record_similarity`` asks for it."""
    if record.policy_state:
        policy_set.load_state_dict(record.policy_state)
    watch = record_similarity or policy_set.needs_hidden_states
    state = _prefill(runner, tokenizer, record, policy_set, watch)
    state.attempt, state.rollbacks = record.attempt, record.rollbacks
    state.conservative = (
        record.rollbacks >= CIRCUIT_BREAKER_ROLLBACKS
        if record.conservative is None
        else record.conservative
    )
    state.skip_before_at = record.skip_before_at
    return state


def _prefill(
    runner: ModelRunner,
    tokenizer: Tokenizer,
    record: Checkpoint,
    policy_set: PolicySet,
    watch: bool,
) -> DecodeState:
    prompt_ids, generated_ids, histories = record.prompt_ids, record.generated_ids, record.histories
    cache = runner.new_cache()
    state = DecodeState(prompt_ids, record.sampling, policy_set, cache, torch.empty(0))
    state.detok.extend(tokenizer, generated_ids)
    state.notes = record.note_list()
    states: torch.Tensor | None = None  # [N, H], when similarity or the histories need them
    if watch or (generated_ids and histories is None):
        out, states = runner.hidden_states(state.context_ids(), cache)
    else:
        out = runner.forward(state.context_ids(), cache)
    state.next_logits = out.logits[-1]
    if watch and states is not None:
        state.prompt_hidden = states[: len(prompt_ids)].mean(0)
    if histories is not None:
        state.top1_history = list(histories["top1"])
        state.entropy_history = list(histories["entropy"])
        state.similarity_history = list(histories["similarity"])
    elif generated_ids and states is not None:
        _recompute_histories(runner, state, states)
    return state


def _recompute_histories(runner: ModelRunner, state: DecodeState, states: torch.Tensor) -> None:
    """top1/entropy/similarity of every generated token from the prefill's hidden states."""
    count = len(state.generated_ids)
    # The hidden state just before each generated token predicted it (notes included).
    where = torch.tensor([state.kv_index(i) for i in range(count)], dtype=torch.long)
    for lo in range(0, count, HISTORY_CHUNK):
        chunk = states[where[lo : lo + HISTORY_CHUNK] - 1]  # [C, H]
        top1, entropy = top1_and_entropy(runner.logits_from_hidden(chunk))
        state.top1_history += top1
        state.entropy_history += entropy
    for i in range(count):
        state.similarity_history.append(state.similarity(states[int(where[i])]))
