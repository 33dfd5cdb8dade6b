"""Look-ahead at a pause: the branches run over forks of the frozen cache (each through the
compiled step where there is one, else as one eager batch), each continues as a fresh greedy
run would, and the paused state is left byte for byte."""

from __future__ import annotations

import time

import pytest
import torch

from inference.decode import RunRequest
from inference.sink import CollectingSink
from inference.text import REPLACEMENT

STEP_PATHS = ("eager", "compiled")  # each test on both decode steps (conftest.py)

PROMPT = "The patient has a blood pressure of"
PARAMS = {"temperature": 0.8, "seed": 3, "max_new_tokens": 40}
STEPS = 5


def paused(engine, at: int = 6):
    state = engine.start(PROMPT, PARAMS)
    assert engine.run(state, RunRequest(CollectingSink(), pause_at=at)).reason == "pause"
    return state


def cache_copy(engine, state):
    return [(k.clone(), v.clone()) for k, v in engine.runner.cache_tensors(state.cache)]


def top3(engine, state) -> list[int]:
    return [alt.token_id for alt in engine.signals(state).alternatives[:3]]


def fresh_greedy(engine, state, token_id: int, steps: int) -> list[int]:
    """What a new greedy run from prompt + generated + the candidate writes."""
    ids = state.prompt_ids + state.generated_ids + [token_id]
    fresh = engine.start(ids, {"temperature": 0, "max_new_tokens": steps - 1})
    engine.run(fresh)
    return [token_id, *fresh.generated_ids]


def test_it_leaves_the_paused_state_byte_identical(engine):
    state = paused(engine)
    before = engine.snapshot(state)
    tensors = cache_copy(engine, state)
    logits = state.next_logits.clone()
    text, ids = state.text, list(state.generated_ids)

    branches = engine.look_ahead(state, top3(engine, state), steps=STEPS)

    assert len(branches) == 3
    assert engine.snapshot(state) == before
    for (k0, v0), (k1, v1) in zip(tensors, engine.runner.cache_tensors(state.cache), strict=True):
        assert k1.shape[0] == 1  # still one sequence: the branches ran on a copy
        assert torch.equal(k0, k1) and torch.equal(v0, v1)
    assert torch.equal(logits, state.next_logits)
    assert (state.text, state.generated_ids) == (text, ids)


def test_each_branch_is_what_a_fresh_greedy_run_writes(engine):
    state = paused(engine)
    candidates = top3(engine, state)
    branches = engine.look_ahead(state, candidates, steps=STEPS)
    for branch, candidate in zip(branches, candidates, strict=True):
        expected = fresh_greedy(engine, state, candidate, STEPS)
        if branch.ends:
            expected = expected[: len(branch.ids)]
        assert branch.token_id == candidate
        assert branch.ids == expected


def eager_forwards(engine, monkeypatch) -> list[tuple[int, ...]]:
    """The input shapes of the model's eager forwards from here on (compiled steps do not
    call it)."""
    shapes = []
    forward = engine.runner.model.forward

    def spy(*args, **kwargs):
        shapes.append(tuple(kwargs["input_ids"].shape))
        return forward(*args, **kwargs)

    monkeypatch.setattr(engine.runner.model, "forward", spy)
    return shapes


def test_without_a_compiled_step_the_branches_run_as_one_batch(engine, monkeypatch):
    if engine.runner.step is not None:
        pytest.skip("the compiled path runs each branch through the compiled step")
    state = paused(engine)
    shapes = eager_forwards(engine, monkeypatch)
    engine.look_ahead(state, top3(engine, state), steps=STEPS)
    assert shapes == [(3, 1)] * (STEPS - 1)


def test_resuming_after_a_look_ahead_writes_what_it_would_have(engine):
    reference = paused(engine)
    engine.run(reference)
    state = paused(engine)
    engine.look_ahead(state, top3(engine, state), steps=STEPS)
    engine.run(state)
    assert state.generated_ids == reference.generated_ids


def test_the_text_is_what_the_branch_adds_after_the_generated_text(engine, tokenizer):
    state = paused(engine)
    branch = engine.look_ahead(state, top3(engine, state), steps=STEPS)[0]
    whole = tokenizer.decode(state.generated_ids + branch.ids, skip_special_tokens=True)
    assert whole.rstrip(REPLACEMENT) == state.text + branch.text  # no partial character shown


def test_with_a_compiled_step_each_forward_is_one_compiled_step(engine, monkeypatch):
    if engine.runner.step is None:
        pytest.skip("the eager path runs the branches as one batch")
    state = paused(engine)
    eager = eager_forwards(engine, monkeypatch)
    calls = engine.runner.forward_calls
    branches = engine.look_ahead(state, top3(engine, state), steps=STEPS)
    assert eager == []  # no eager forward: a slice is one compiled step, as short as a token
    assert engine.runner.forward_calls - calls == sum(len(b.ids) - 1 for b in branches)


def test_a_single_step_runs_no_forward(engine):
    state = paused(engine)
    calls = engine.runner.forward_calls
    branches = engine.look_ahead(state, top3(engine, state), steps=1)
    assert engine.runner.forward_calls == calls
    assert [b.ids for b in branches] == [[c] for c in top3(engine, state)]


def test_bad_steps_are_refused(engine):
    state = paused(engine)
    with pytest.raises(ValueError, match="steps"):
        engine.look_ahead(state, top3(engine, state), steps=0)
    assert engine.look_ahead(state, [], steps=3) == []


@pytest.mark.model
@pytest.mark.slow
def test_on_the_real_model_each_branch_is_exact(real_engine):
    state = real_engine.start(
        "A 58-year-old with chest pain. Write the clinical note.", {"temperature": 0}
    )
    real_engine.run(state, RunRequest(pause_at=20))
    before = real_engine.snapshot(state)
    candidates = top3(real_engine, state)
    started = time.perf_counter()
    branches = real_engine.look_ahead(state, candidates, steps=6)
    cost = time.perf_counter() - started
    assert real_engine.snapshot(state) == before
    for branch, candidate in zip(branches, candidates, strict=True):
        expected = fresh_greedy(real_engine, state, candidate, 6)
        assert branch.ids == expected[: len(branch.ids)]
    # The cost is printed, not asserted: on a shared CPU it says more about the neighbours.
    print(f"look-ahead: 3 branches x 6 tokens at {state.position} positions: {cost * 1000:.0f} ms")


def test_in_slices_it_yields_after_each_forward_and_gives_the_same_branches(engine):
    state = paused(engine)
    whole = engine.look_ahead(state, top3(engine, state), STEPS)
    slices = engine.look_ahead_in_slices(state, top3(engine, state), STEPS)
    before, yields = engine.runner.forward_calls, 0
    while True:
        try:
            next(slices)
        except StopIteration as done:
            branches = done.value
            break
        yields += 1
        assert engine.runner.forward_calls - before == yields  # one forward a slice
    assert branches == whole
    if engine.runner.step is None:  # one batch: a forward per token of all branches
        assert yields == STEPS - 1
    else:  # a forward per token of each branch
        assert yields == sum(len(b.ids) - 1 for b in branches)
