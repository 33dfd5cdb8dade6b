"""The compiled decode step on the real default model: the eager step's probabilities (within
1e-4) and greedy tokens on the test prompts. The contract suite (test_backend_contract.py)
runs pauses, resumes, snapshots, rebuilds and edits on it too."""

from __future__ import annotations

import pytest
import torch

from inference.decode import RunRequest
from inference.sink import CollectingSink, TokenEvent

pytestmark = [pytest.mark.model, pytest.mark.slow]

SYSTEM = "You are a careful clinical assistant."
PROMPTS = [
    "A patient has a mild headache. What can they take? Answer in two sentences.",
    "Summarize the tenant's obligations under a standard residential lease.",
    "Write a long, detailed story about a lighthouse keeper who finds a strange map.",
]
STEPS = 32


def greedy(engine, prompt: str) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy ids and the distribution each was drawn from, through the engine's runner."""
    runner = engine.runner
    cache = runner.new_cache()
    logits = runner.forward(engine.encode_prompt(prompt, SYSTEM), cache).logits[-1]
    tokens, probs = [], []
    for _ in range(STEPS):
        probs.append(torch.softmax(logits, -1))
        tokens.append(int(logits.argmax()))
        logits = runner.forward([tokens[-1]], cache).logits[-1]
    return tokens, probs


@pytest.mark.parametrize("prompt", PROMPTS, ids=["headache", "lease", "lighthouse"])
def test_it_gives_the_eager_probabilities_and_tokens(real_engine, compiled_real_engine, prompt):
    assert compiled_real_engine.runner.compiled and not real_engine.runner.compiled
    eager_tokens, eager_probs = greedy(real_engine, prompt)
    tokens, probs = greedy(compiled_real_engine, prompt)
    assert tokens == eager_tokens
    worst = max(float((a - b).abs().max()) for a, b in zip(probs, eager_probs, strict=True))
    assert worst < 1e-4


def test_live_attention_works_on_the_compiled_step(real_engine, compiled_real_engine):
    rows = []
    for engine in (real_engine, compiled_real_engine):
        sink = CollectingSink()
        state = engine.start(PROMPTS[0], {"temperature": 0.0, "max_new_tokens": 6}, system=SYSTEM)
        engine.run(state, RunRequest(sink, live_attention="mean"))
        rows.append([torch.tensor(e.attention) for e in sink.of(TokenEvent)])
    for a, b in zip(*rows, strict=True):
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-4)
