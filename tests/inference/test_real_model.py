"""Integration on the real default model (SmolLM2-135M-Instruct). Small: <= 40 new tokens."""

from __future__ import annotations

import re

import pytest

from inference.decode import RunRequest
from inference.sink import CollectingSink, FlagEvent
from inference.state import Checkpoint

pytestmark = [pytest.mark.model, pytest.mark.slow]

SYSTEM = "You are a careful clinical assistant."
PROMPT = "A patient has a mild headache. What can they take? Answer in two sentences."
GREEDY = {"temperature": 0.0, "max_new_tokens": 40}


@pytest.fixture(scope="module")
def reference_run(real_engine):
    """The plain greedy generation and why it stopped."""
    state = real_engine.start(PROMPT, GREEDY, system=SYSTEM)
    stop = real_engine.run(state)
    assert len(state.generated_ids) >= 20, state.text
    return state, stop


@pytest.fixture(scope="module")
def reference(reference_run):
    return reference_run[0]


def test_it_matches_model_generate_greedily(real_engine, reference):
    import torch

    ids = torch.tensor([reference.prompt_ids])
    out = real_engine.runner.model.generate(
        ids, max_new_tokens=len(reference.generated_ids), do_sample=False
    )
    assert out[0, ids.shape[1] :].tolist() == reference.generated_ids


def test_a_regex_pause_resumes_to_the_identical_text(real_engine, reference):
    words = [w for w in reference.text.split() if w.isalpha() and len(w) > 4]
    word = words[1]
    policy = {"name": "term", "kind": "regex", "params": {"pattern": word}}
    state = real_engine.start(PROMPT, GREEDY, [policy], system=SYSTEM)
    stop = real_engine.run(state)
    assert stop.reason == "pause" and state.text.endswith(word)
    assert state.text.count(word) == 1
    restored = real_engine.restore(real_engine.snapshot(state))
    real_engine.run(restored)
    assert restored.text == reference.text


@pytest.mark.parametrize("written", ["current", "version 1"])
def test_a_snapshot_read_without_copies_continues_to_the_identical_text(
    real_engine, reference, written
):
    from tests.inference.snapshot_v1 import dumps_v1

    state = real_engine.start(PROMPT, GREEDY, system=SYSTEM)
    real_engine.run(state, RunRequest(pause_at=12))
    real_engine.settle(state)
    data = (
        real_engine.snapshot(state) if written == "current" else dumps_v1(state, real_engine.runner)
    )
    restored = real_engine.restore(data)  # format 2: the KV views ``data`` until written
    real_engine.run(restored)
    assert restored.text == reference.text
    again = real_engine.restore(data)  # the bytes were never written: the same continuation
    real_engine.run(again)
    assert again.generated_ids == reference.generated_ids


def test_sentence_and_tool_call_policies_pause_on_real_text(real_engine):
    sentences = {"name": "s", "kind": "sentence_count", "params": {"every": 1}}
    state = real_engine.start("Write two short sentences about water.", GREEDY, [sentences])
    assert real_engine.run(state).reason == "pause"
    # an English sentence completes when whitespace follows its terminator
    assert re.search(r"^[^.!?]+[.!?]\s+\S*$", state.text), state.text

    tool = {"name": "t", "kind": "tool_call", "params": {"key": "action"}}
    ask = 'Reply with exactly this JSON and nothing else: {"action": "lookup", "drug": "aspirin"}'
    state = real_engine.start(ask, GREEDY, [tool])
    stop = real_engine.run(state)
    assert stop.reason == "pause" and state.text.rstrip().endswith("}"), state.text


def test_an_edit_continues_like_a_fresh_generation(real_engine, reference):
    state = real_engine.start(PROMPT, {**GREEDY, "max_new_tokens": 30}, system=SYSTEM)
    real_engine.run(state, RunRequest(pause_at=12))
    start = state.text.find(" ", 5)
    end = state.text.find(" ", start + 1)
    real_engine.replace_text(state, start, end, " paracetamol")
    assert "paracetamol" in state.text
    edited = list(state.generated_ids)
    real_engine.run(state)
    fresh = real_engine.rebuild(Checkpoint(state.prompt_ids, edited, state.params))
    real_engine.run(fresh)
    assert fresh.text == state.text


def test_default_policies_flag_without_stopping(real_engine, reference_run):
    reference, reference_stop = reference_run
    policies = [
        {"name": "kw", "kind": "keyword", "action": "flag", "params": {"keywords": ["headache"]}},
        {"name": "lc", "kind": "low_confidence", "action": "flag", "params": {"threshold": 0.5}},
    ]
    state = real_engine.start(PROMPT, GREEDY, policies, system=SYSTEM)
    sink = CollectingSink()
    assert real_engine.run(state, RunRequest(sink)).reason == reference_stop.reason
    assert state.generated_ids == reference.generated_ids
    assert sink.of(FlagEvent)


def test_live_attention_matches_the_eager_view_with_grouped_heads(real_engine):
    import torch

    from inference.sink import TokenEvent

    state = real_engine.start("Name a fruit.", GREEDY)
    sink = CollectingSink()
    real_engine.run(state, RunRequest(sink, pause_at=3, live_attention=5))
    live = torch.tensor(sink.of(TokenEvent)[-1].attention)
    view = real_engine.attention(state, layer=5)
    assert len(view.heads) == 9 and len(view.layers) == 30
    assert torch.allclose(live, torch.tensor(view.layers[5]), atol=1e-4)
