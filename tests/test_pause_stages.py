"""A manual pause's path on the worker, as its pause event carries it: each stage in ms from
the request, the loop's median step, and what the turn before the halt held."""

from __future__ import annotations

from reviewer.lifecycle.reports import stages_ms


def test_it_gives_each_stage_in_ms_from_the_request_and_what_the_turn_before_held():
    stamps = {
        "read": 100.004,
        "turn": 100.030,
        "step": 100.031,
        "honoured": 100.0325,
        "step_s": 0.028,
        "previous_turn_s": 0.0513,
        "previous_step_s": 0.0502,
        "previous_slice_s": 0.0,  # nothing of the kind in that turn
        "turn_s": 0.9,  # not the turn before's: not a stage
    }
    assert stages_ms(100.0, stamps) == {
        "read": 4.0,
        "turn": 30.0,
        "step": 31.0,
        "honoured": 32.5,
        "step_ms": 28.0,
        "previous_turn_ms": 51.3,
        "previous_step_ms": 50.2,
    }


def test_a_policy_pause_has_no_path():
    assert stages_ms(None, {"turn": 1.0, "previous_turn_s": 0.05}) == {}
