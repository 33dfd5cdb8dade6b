"""A decode state from a checkpoint record: one prefill over prompt + generated ids.

A new generation is a record with no generated ids. The histories (top1, entropy and
similarity per generated token) come from the record, or are recomputed from the prefill's
last-layer hidden states when the record has none.
"""

from __future__ import annotations

import torch

from inference.policies import PolicySet
from inference.signals import top1_and_entropy
from inference.state import Checkpoint, DecodeState
from inference.text import Detokenizer, Tokenizer
from inference.transformers_backend import gate as gate_mod
from inference.transformers_backend.runner import ModelRunner

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
    detok = Detokenizer()
    detok.extend(tokenizer, record.generated_ids)
    state = DecodeState.from_checkpoint(record, detok, policy_set, runner.new_cache())
    attach_gate(state, tokenizer)  # before the prefill: it gates the rows past the prompt
    watch = record_similarity or policy_set.needs_hidden_states
    _prefill(runner, state, watch, recompute=record.histories is None)
    return state


def attach_gate(state: DecodeState, tokenizer: Tokenizer) -> None:
    """Gate the state's later forwards when its params ask for gated attention (not under
    <RECALL>); the gate mirrors the context its cache covers now."""
    config = state.params.attention
    if not config.gated or state.recall:
        gate_mod.attach(state.cache, None)
        return
    covered = state.cache.get_seq_length()
    anchors = gate_mod.anchor_positions(state.anchors)
    ids = state.context_ids()[:covered]
    gate = gate_mod.Gate(config, len(state.prompt_ids), anchors, tokenizer.decode, ids)
    gate_mod.attach(state.cache, gate)


def _prefill(runner: ModelRunner, state: DecodeState, watch: bool, recompute: bool) -> None:
    """One forward over the context; the prompt's mean hidden state when ``watch``, and the
    histories from the hidden states when the record had none (``recompute``)."""
    recompute = recompute and bool(state.generated_ids)
    states: torch.Tensor | None = None  # [N, H], when similarity or the histories need them
    if watch or recompute:
        out, states = runner.hidden_states(state.context_ids(), state.cache)
    else:
        out = runner.forward(state.context_ids(), state.cache)
    state.next_logits = out.logits[-1]
    if watch and states is not None:
        state.prompt_hidden = states[: len(state.prompt_ids)].mean(0)
    if recompute and states is not None:
        _recompute_histories(runner, state, states)


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
