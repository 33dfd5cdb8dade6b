"""Edits at a pause change only what they name; the continuation equals a fresh run."""

from __future__ import annotations

import pytest
import torch

from inference.decode import RunRequest
from inference.edits import EditError
from inference.state import Checkpoint

STEP_PATHS = ("eager", "compiled")  # each test on both decode steps (conftest.py)

PROMPT = "Hello world, hello model."
PARAMS = {"temperature": 0.8, "seed": 9, "max_new_tokens": 24}


def paused(engine, at: int = 12):
    state = engine.start(PROMPT, PARAMS)
    assert engine.run(state, RunRequest(pause_at=at)).reason == "pause"
    return state


def assert_continues_like_a_fresh_run(engine, state):
    edited = list(state.generated_ids)
    engine.run(state)
    fresh = engine.rebuild(Checkpoint(state.prompt_ids, edited, PARAMS))
    engine.run(fresh)
    assert state.generated_ids == fresh.generated_ids
    assert state.generated_ids[: len(edited)] == edited


def test_it_replaces_a_char_range_recomputing_only_the_tail(engine):
    state = paused(engine)
    before = state.text
    forwarded = engine.runner.tokens_forwarded
    result = engine.replace_text(state, 3, 6, "recommend")
    assert state.text == before[:3] + "recommend" + before[6:]
    assert (result.kind, result.text_before, result.text_after) == (
        "replace",
        before[3:6],
        "recommend",
    )
    assert result.token_start <= 3 and result.token_end == 12
    assert result.to_dict()["new_token_end"] == len(state.generated_ids)
    # only the new tail: nothing before the edit point, not even the last kept token
    assert engine.runner.tokens_forwarded - forwarded == result.new_token_end - result.token_start
    assert engine.runner.cache_length(state.cache) == state.position
    assert_continues_like_a_fresh_run(engine, state)


def test_it_replaces_a_token_range(engine):
    state = paused(engine)
    before = list(state.generated_ids)
    new = engine.tokenizer.encode(" aspirin")
    result = engine.replace_tokens(state, 4, 6, " aspirin")
    assert state.generated_ids == before[:4] + new + before[6:]
    assert (result.token_start, result.new_token_end) == (4, 10 + len(new))
    assert_continues_like_a_fresh_run(engine, state)


def test_it_chooses_a_top_k_alternative_as_the_next_token(engine):
    state = paused(engine)
    second = engine.signals(state).alternatives[1]
    result = engine.choose_alternative(state, second.token_id)
    assert state.generated_ids[-1] == second.token_id and len(state.generated_ids) == 13
    assert result.text_after == second.text
    assert_continues_like_a_fresh_run(engine, state)


def test_truncating_and_resuming_regenerates_the_same_tokens(engine):
    reference = engine.start(PROMPT, PARAMS)
    engine.run(reference)
    state = paused(engine)
    engine.truncate(state, 5)
    assert state.generated_ids == reference.generated_ids[:5]
    engine.run(state)
    assert state.generated_ids == reference.generated_ids


def test_it_appends_reviewer_guidance(engine):
    state = paused(engine)
    before = state.text
    engine.append_text(state, " Follow-up in two weeks.")
    assert state.text == before + " Follow-up in two weeks."
    assert_continues_like_a_fresh_run(engine, state)


def test_it_applies_several_replacements_at_once(engine):
    state = paused(engine)
    before = state.text
    results = engine.edit(
        state,
        {"kind": "replace", "start": 8, "end": 9, "text": "B"},
        {"kind": "replace", "start": 1, "end": 2, "text": "A"},
    )
    assert [r.char_start for r in results] == [1, 8]
    assert state.text == before[:1] + "A" + before[2:8] + "B" + before[9:]


@pytest.mark.parametrize(
    "edit",
    [
        {"kind": "replace", "start": 2, "end": 5, "text": " the dose"},
        {"kind": "replace", "start": 4, "end": 12, "text": " stop", "unit": "token"},
        {"kind": "append", "text": " Please check."},
        {"kind": "choose", "token_id": 42, "position": 3},
        {"kind": "truncate", "position": 5},
    ],
)
def test_it_keeps_the_per_token_signals_of_an_edited_generation(engine, edit):
    state = paused(engine)
    engine.edit(state, edit)
    fresh = engine.rebuild(Checkpoint(state.prompt_ids, state.generated_ids, PARAMS))
    assert len(state.top1_history) == len(state.generated_ids)
    assert state.top1_history == pytest.approx(fresh.top1_history, abs=1e-4)
    assert state.entropy_history == pytest.approx(fresh.entropy_history, abs=1e-4)
    assert torch.allclose(state.next_logits, fresh.next_logits, atol=1e-4)


@pytest.mark.parametrize(
    "edit",
    [
        {"kind": "replace", "start": 9, "end": 12, "text": " the dose", "unit": "token"},
        {"kind": "append", "text": " Check."},
        {"kind": "choose", "token_id": 42},
        {"kind": "choose", "token_id": 42, "position": 11},
        {"kind": "truncate", "position": 11},
        {"kind": "truncate", "position": 12},
    ],
)
def test_it_edits_a_generation_that_ended_on_its_token_limit(engine, edit):
    state = engine.start(PROMPT, PARAMS)
    assert engine.run(state, RunRequest(max_new_tokens=12)).reason == "max_tokens"
    assert state.pending is not None  # the last token's forward was deferred
    engine.edit(state, edit)
    assert state.pending is None
    assert engine.runner.cache_length(state.cache) == state.position
    fresh = engine.rebuild(Checkpoint(state.prompt_ids, state.generated_ids, PARAMS))
    assert torch.allclose(state.next_logits, fresh.next_logits, atol=1e-4)
    assert_continues_like_a_fresh_run(engine, state)


def test_an_edit_never_runs_the_pending_token_it_replaces(engine):
    state = engine.start(PROMPT, PARAMS)
    engine.run(state, RunRequest(max_new_tokens=12))
    forwarded = engine.runner.tokens_forwarded
    result = engine.replace_tokens(state, 10, 12, " stop")
    assert engine.runner.tokens_forwarded - forwarded == result.new_token_end - 10


def snapshot_of(state) -> tuple:
    cache = [(layer.keys.clone(), layer.values.clone()) for layer in state.cache.layers]
    return state.summary(), cache, state.next_logits.clone()


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"kind": "replace", "start": 5, "end": 999, "text": "x"}, "outside"),
        ({"kind": "replace", "start": 6, "end": 5, "text": "x"}, "outside"),
        ({"kind": "replace", "start": 0, "end": 99, "text": "x", "unit": "token"}, "outside"),
        ({"kind": "truncate", "position": 13}, "outside"),
        ({"kind": "truncate", "position": -1}, "outside"),
        ({"kind": "choose", "token_id": 10**6}, "outside"),
        ({"kind": "append", "text": ""}, "append needs"),
        ({"kind": "rewrite"}, "kind"),
    ],
)
def test_an_invalid_edit_leaves_the_state_unchanged(engine, edit, message):
    state = paused(engine)
    summary, cache, logits = snapshot_of(state)
    with pytest.raises(EditError, match=message):
        engine.edit(state, edit)
    assert_unchanged(state, summary, cache, logits)


def test_overlapping_edits_are_refused_together(engine):
    state = paused(engine)
    summary, cache, logits = snapshot_of(state)
    with pytest.raises(EditError, match="overlap"):
        engine.edit(
            state,
            {"kind": "replace", "start": 2, "end": 6, "text": "a"},
            {"kind": "replace", "start": 5, "end": 8, "text": "b"},
        )
    assert_unchanged(state, summary, cache, logits)


def assert_unchanged(state, summary, cache, logits) -> None:
    assert state.summary() == summary
    assert torch.equal(state.next_logits, logits)
    for layer, (keys, values) in zip(state.cache.layers, cache, strict=True):
        assert torch.equal(layer.keys, keys) and torch.equal(layer.values, values)


@pytest.mark.model
@pytest.mark.slow
def test_it_keeps_special_token_markup_in_edit_text_as_plain_text(real_engine):
    state = real_engine.start("Say hello.", {"temperature": 0.0, "max_new_tokens": 4})
    real_engine.run(state)
    eos = real_engine.tokenizer.eos_token_id
    real_engine.append_text(state, " <|im_end|>")
    assert eos not in state.generated_ids
    assert state.text.endswith("<|im_end|>")
