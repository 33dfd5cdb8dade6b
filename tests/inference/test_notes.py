"""Notes: context the model reads but did not write (the time, told on a late resume). The
generated text never holds one; what follows it equals a fresh run over the same context; it
survives snapshots, rebuilds and edits."""

from __future__ import annotations

import pytest

from inference.decode import RunRequest
from inference.state import Checkpoint
from reviewer.lifecycle.record import engine_meta as session_meta

STEP_PATHS = ("eager", "compiled")  # each test on both decode steps (conftest.py)

PROMPT = "We recommend a follow-up visit."
GREEDY = {"temperature": 0, "seed": 1, "max_new_tokens": 24}
SAMPLED = {"temperature": 0.8, "seed": 5, "max_new_tokens": 24}
NOTE = " (Current time: 2026-12-01 14:05 UTC.) "


def noted(engine, params: dict, at: int = 6, prompt=PROMPT):
    """A state paused at ``at`` tokens with a note added, and the note."""
    state = engine.start(prompt, params)
    engine.run(state, RunRequest(pause_at=at))
    return state, engine.add_note(state, NOTE)


def from_scratch(engine, state, at: int, params: dict) -> list[int]:
    """Tokens after the note, from one prefill over prompt + generated[:at] + note ids (the
    same absolute positions, so the same sampling keys)."""
    context = state.prompt_ids + state.generated_ids[:at] + state.notes[0].ids
    fresh = engine.start(context, params)
    engine.run(fresh, RunRequest(max_new_tokens=params["max_new_tokens"] - at))
    return fresh.generated_ids


@pytest.mark.parametrize("params", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_a_note_is_context_and_what_follows_equals_a_fresh_run(engine, params):
    state, note = noted(engine, params)
    assert note.at == 6 and note.ids and NOTE not in state.text
    before = list(state.generated_ids)
    assert state.position == len(state.prompt_ids) + 6 + len(note.ids)
    engine.run(state)
    assert state.generated_ids[:6] == before and "Current time" not in state.text
    assert state.generated_ids[6:] == from_scratch(engine, state, 6, params)


def test_a_note_survives_a_snapshot_and_a_rebuild(engine):
    state, note = noted(engine, SAMPLED)
    record = Checkpoint.from_dict(state.to_checkpoint().to_dict())
    assert record.note_list() == [note] and session_meta(record)["notes"][0]["text"] == NOTE
    restored, rebuilt = engine.restore(engine.snapshot(state)), engine.rebuild(record)
    engine.run(state)
    for copy in (restored, rebuilt):
        assert copy.position == len(copy.prompt_ids) + 6 + len(note.ids)
        engine.run(copy)
        assert copy.generated_ids == state.generated_ids and copy.text == state.text


def test_an_edit_before_a_note_drops_it_and_one_after_keeps_it(engine):
    state, note = noted(engine, GREEDY)
    engine.run(state, RunRequest(pause_at=10))
    engine.replace_tokens(state, 8, 9, " there")
    assert state.notes == [note]
    fresh = engine.rebuild(Checkpoint.from_dict(state.to_checkpoint().to_dict()))
    engine.run(state)
    engine.run(fresh)
    assert state.generated_ids == fresh.generated_ids
    engine.truncate(state, 3)
    assert state.notes == [] and state.position == len(state.prompt_ids) + 3


def test_the_attention_view_names_the_note_tokens(engine):
    state, note = noted(engine, GREEDY)
    view = engine.attention(state)
    assert len(view.tokens) == state.position == len(view.layers[0])


def test_it_refuses_an_empty_note(engine):
    state = engine.start(PROMPT, GREEDY)
    with pytest.raises(ValueError, match="needs some text"):
        engine.add_note(state, "")


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.parametrize("params", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_the_real_model_reads_the_time_without_writing_it(real_engine, params):
    prompt = "Write a one-line reminder to take blood pressure medicine today."
    state, note = noted(real_engine, params, at=5, prompt=prompt)
    real_engine.run(state)
    assert "Current time" not in state.text and NOTE not in state.text
    assert state.generated_ids[5:] == from_scratch(real_engine, state, 5, params)
    rebuilt = real_engine.rebuild(Checkpoint.from_dict(state.to_checkpoint().to_dict()))
    assert rebuilt.position == state.position and rebuilt.text == state.text


@pytest.mark.model
@pytest.mark.slow
def test_the_real_model_resumes_identically_without_a_note(real_engine):
    prompt = "Write a one-line reminder to take blood pressure medicine today."
    whole = real_engine.start(prompt, SAMPLED)
    real_engine.run(whole)
    paused = real_engine.start(prompt, SAMPLED)
    real_engine.run(paused, RunRequest(pause_at=5))
    real_engine.run(paused)
    assert paused.generated_ids == whole.generated_ids and not paused.notes
