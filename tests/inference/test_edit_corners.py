"""Corners of edits and the step found in review: the end of a text inside a character, an
end-of-text token under a chosen one, a note under the repetition penalty, a distribution
an edit changed at the pause's own position, and a masked logit's entropy."""

from __future__ import annotations

import math

import torch

from inference.decode import RunRequest
from inference.signals import summarize, top1_and_entropy

PROMPT = "Hello world, hello model."
SPLIT = {"temperature": 0.9, "seed": 3, "max_new_tokens": 30}  # token 0: a lone lead byte


def test_it_appends_after_the_text_the_reader_saw_not_half_a_character(engine):
    state = engine.start(PROMPT, SPLIT)
    engine.run(state, RunRequest(pause_at=1))
    assert state.text == "" and state.detok.emitted < len(state.generated_ids)
    engine.append_text(state, "XYZ")
    assert state.text == "XYZ"


def test_it_puts_a_chosen_token_in_the_place_of_the_end(engine):
    state = engine.start(PROMPT, {"temperature": 0, "max_new_tokens": 12})
    engine.run(state, RunRequest(pause_at=0))
    engine.choose_alternative(state, 0)  # the end of text, first
    assert engine.run(state).reason == "eos"
    engine.choose_alternative(state, 72)  # instead of ending: this token
    assert state.generated_ids == [72]
    fresh = engine.start(state.prompt_ids + [72], {"temperature": 0, "max_new_tokens": 11})
    engine.run(fresh)
    engine.run(state)
    assert state.generated_ids[1:] == fresh.generated_ids


def test_it_counts_a_notes_tokens_in_the_repetition_penalty(engine):
    params = {"temperature": 0, "max_new_tokens": 24, "repetition_penalty": 3.0}
    state = engine.start("We recommend a follow-up visit.", params)
    engine.run(state, RunRequest(pause_at=6))
    engine.add_note(state, " (Current time: 2026-12-01 14:05 UTC.) ")
    engine.run(state)
    context = state.prompt_ids + state.generated_ids[:6] + state.notes[0].ids
    fresh = engine.start(context, params)
    engine.run(fresh, RunRequest(max_new_tokens=18))
    assert state.generated_ids[6:] == fresh.generated_ids


def test_it_weighs_the_distribution_an_edit_made_at_the_pauses_position(engine):
    always = [{"name": "lc", "kind": "low_confidence", "params": {"threshold": 1.0}}]
    state = engine.start(PROMPT, SPLIT, always)
    stop = engine.run(state, RunRequest(pause_at=3))
    while stop.position < 3:
        stop = engine.run(state, RunRequest(pause_at=3))
    assert stop.decision.kind == "low_confidence" and state.skip_before_at == 3
    engine.choose_alternative(state, 72, position=2)  # a new token 2: a new distribution at 3
    assert len(state.generated_ids) == 3
    again = engine.run(state)
    assert (again.reason, again.position) == ("pause", 3)


def test_it_gives_a_masked_token_no_part_of_the_entropy():
    row = torch.randn(300)
    row[5] = float("-inf")
    signals, _ = summarize(row, 5, str)
    assert math.isfinite(signals.entropy)
    assert math.isclose(signals.entropy, top1_and_entropy(row[None])[1][0], rel_tol=1e-5)


def test_it_lets_no_automatic_rollback_remove_what_a_reviewer_wrote(engine):
    from inference.decode import Run, _may_roll_back
    from inference.policies.base import Decision

    state = engine.start(PROMPT, {"temperature": 0, "max_new_tokens": 20})
    engine.run(state, RunRequest(pause_at=4))
    engine.choose_alternative(state, 72, position=2)  # the reviewer's token 2
    assert state.edited_upto == 3

    def allowed(point: int) -> bool:
        drift = Decision("drift", "drift", "rollback", "drifted", {}, rollback_to=point)
        return _may_roll_back(Run(state=state), drift)

    assert not allowed(1) and not allowed(2) and allowed(3)
    # Kept through a checkpoint (a snapshot, a rebuild), and after a note too.
    assert engine.rebuild(state.to_checkpoint()).edited_upto == 3
    engine.add_note(state, " (a note) ")
    assert state.edited_upto == len(state.generated_ids) and not allowed(2)
