"""Attention at a pause (the last token re-run: by the compiled step where there is one, else
eagerly with every attention map) and live rows while generating."""

from __future__ import annotations

import pytest
import torch

from inference.decode import RunRequest
from inference.sink import CollectingSink, TokenEvent

STEP_PATHS = ("eager", "compiled")  # each test on both decode steps (conftest.py)

PROMPT = "Hello world, hello reviewer."
PARAMS = {"temperature": 0.8, "seed": 2, "max_new_tokens": 12}


def test_it_shows_the_last_positions_attention_per_layer_and_head(engine):
    state = engine.start(PROMPT, PARAMS)
    engine.run(state, RunRequest(pause_at=6))
    cache = [(layer.keys.clone(), layer.values.clone()) for layer in state.cache.layers]
    view = engine.attention(state, layer=1)
    assert len(view.tokens) == state.position and view.prompt_length == len(state.prompt_ids)
    assert len(view.layers) == 2 and all(len(row) == state.position for row in view.layers)
    assert len(view.heads) == 4 and view.layer == 1
    assert all(sum(row) == pytest.approx(1.0, abs=1e-5) for row in view.layers + view.heads)
    assert view.to_dict()["tokens"][-1] == engine.token_text(state.generated_ids[-1])
    # the frozen state is untouched
    for layer, (keys, values) in zip(state.cache.layers, cache, strict=True):
        assert torch.equal(layer.keys, keys) and torch.equal(layer.values, values)
    assert engine.runner.model.config._attn_implementation == "caesura_sdpa"


def test_live_rows_match_the_pause_view_and_change_no_token(engine):
    plain = engine.start(PROMPT, PARAMS)
    engine.run(plain)
    live = engine.start(PROMPT, PARAMS)
    sink = CollectingSink()
    engine.run(live, RunRequest(sink, pause_at=6, live_attention="mean"))
    rows = [e.attention for e in sink.of(TokenEvent)]
    assert [len(r) for r in rows] == [len(live.prompt_ids) + i + 1 for i in range(6)]
    expected = torch.tensor(engine.attention(live).layers).mean(0)
    assert torch.allclose(torch.tensor(rows[-1]), expected, atol=1e-5)
    engine.run(live, RunRequest(sink, live_attention=0))
    assert live.generated_ids == plain.generated_ids


def test_it_rejects_a_layer_that_does_not_exist(engine):
    state = engine.start(PROMPT, PARAMS)
    with pytest.raises(ValueError, match="layer"):
        engine.attention(state, layer=5)
    with pytest.raises(ValueError, match="live_attention"):
        engine.run(state, RunRequest(live_attention=7))


def test_it_says_where_notes_sit_among_the_context_positions(engine):
    state = engine.start(PROMPT, PARAMS)
    engine.run(state, RunRequest(pause_at=3))
    first = engine.add_note(state, " (The time is 14:05.) ")
    engine.run(state, RunRequest(pause_at=5))
    second = engine.add_note(state, " (Later.) ")
    view = engine.attention(state)
    prompt = len(state.prompt_ids)
    start = prompt + 3
    later = start + len(first.ids) + 2
    assert view.notes == [[start, start + len(first.ids)], [later, later + len(second.ids)]]
    ids = state.context_ids()
    assert [ids[p] for p in range(*view.notes[1])] == second.ids
    outside = [p for p in range(prompt, len(ids)) if not any(a <= p < b for a, b in view.notes)]
    assert [ids[p] for p in outside] == state.generated_ids
    assert engine.attention(engine.start(PROMPT, PARAMS)).notes == []


def test_the_compiled_step_re_runs_the_last_position_as_the_eager_model_does(engine):
    if engine.runner.step is None:
        pytest.skip("the eager path has only the eager re-run")
    state = engine.start(PROMPT, PARAMS)
    engine.run(state, RunRequest(pause_at=6))
    last = state.context_ids()[-1]
    compiled = engine.runner.last_token_attention(state.cache, last)
    step, engine.runner.step = engine.runner.step, None
    try:
        eager = engine.runner.last_token_attention(state.cache, last)
    finally:
        engine.runner.step = step
    assert compiled.shape == eager.shape == (2, 4, state.position)
    assert torch.allclose(compiled, eager, atol=1e-4)


def test_a_context_of_one_position_attends_to_itself(engine):
    state = engine.start([5], {"temperature": 0.0, "max_new_tokens": 4})
    view = engine.attention(state)
    assert view.layers == [[pytest.approx(1.0)], [pytest.approx(1.0)]]
