"""Pausing and resuming anywhere, any number of times, yields the uninterrupted tokens."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inference.decode import RunRequest
from inference.state import Checkpoint

STEP_PATHS = ("eager", "compiled")  # each test on both decode steps (conftest.py)

PROMPT = "Hello world, hello model."
N = 24
SETTINGS = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
PARAMS = [
    {"temperature": 0.0, "max_new_tokens": N},
    {"temperature": 0.9, "top_k": 40, "top_p": 0.95, "seed": 1, "max_new_tokens": N},
    {"temperature": 1.2, "repetition_penalty": 1.3, "seed": 123, "max_new_tokens": N},
]
_reference: dict[tuple[int, int], list[int]] = {}


def uninterrupted(engine, which: int) -> list[int]:
    """The uninterrupted run on this engine (each decode path is compared with itself)."""
    key = (id(engine), which)
    if key not in _reference:
        state = engine.start(PROMPT, PARAMS[which])
        assert engine.run(state).reason == "max_tokens"
        _reference[key] = list(state.generated_ids)
    return _reference[key]


def resume(engine, state, how: str):
    if how == "bytes":
        return engine.restore(engine.snapshot(state))
    if how == "rebuild":
        record = Checkpoint(
            state.prompt_ids,
            state.generated_ids,
            state.params,
            state.policies.to_specs(),
            policy_state=state.policies.state_dict(),
            attempt=state.attempt,
        )
        return engine.rebuild(record)
    return state


@SETTINGS
@given(
    which=st.integers(0, len(PARAMS) - 1),
    stops=st.lists(
        st.tuples(st.integers(0, N), st.sampled_from(["memory", "bytes", "rebuild"])), max_size=5
    ),
)
def test_it_resumes_to_exactly_the_uninterrupted_tokens(engine, which, stops):
    reference = uninterrupted(engine, which)
    state = engine.start(PROMPT, PARAMS[which])
    for at, how in sorted(stops):
        stop = engine.run(state, RunRequest(pause_at=at))
        if at < N:
            assert (stop.reason, len(state.generated_ids)) == ("pause", at)
        state = resume(engine, state, how)
    engine.run(state)
    assert state.generated_ids == reference


def test_the_reference_run_is_not_degenerate(engine):
    # guards the property above: sampled runs differ from greedy and use many tokens
    greedy, sampled = uninterrupted(engine, 0), uninterrupted(engine, 1)
    assert greedy != sampled and len(set(sampled)) > N // 2


def test_it_pauses_the_same_way_through_a_control_handle_from_a_sink(engine):
    from inference.control import ControlHandle
    from inference.sink import Sink

    control = ControlHandle()

    class PauseAfterFive(Sink):
        def on_token(self, event):
            if event.position == 4:
                control.request_pause("reviewer clicked")

    state = engine.start(PROMPT, PARAMS[1])
    stop = engine.run(state, RunRequest(PauseAfterFive(), control))
    assert (stop.reason, len(state.generated_ids)) == ("pause", 5)
    assert "reviewer clicked" in stop.decision.reason and control.poll() is None
    engine.run(state, RunRequest(control=control))
    assert state.generated_ids == uninterrupted(engine, 1)


def test_it_cancels_and_can_still_be_resumed(engine):
    from inference.control import ControlHandle

    control = ControlHandle()
    control.request_cancel()
    state = engine.start(PROMPT, PARAMS[0])
    assert engine.run(state, RunRequest(control=control)).reason == "cancel"
    assert state.generated_ids == []
    engine.run(state)
    assert state.generated_ids == uninterrupted(engine, 0)


@SETTINGS
@given(
    which=st.integers(0, len(PARAMS) - 1),
    limits=st.lists(st.integers(1, N), min_size=1, max_size=4),
    how=st.sampled_from(["memory", "bytes", "rebuild"]),
)
def test_it_continues_a_run_that_ended_on_its_token_limit(engine, which, limits, how):
    """A run that hits its limit leaves its last token pending; continuing must not notice."""
    reference = uninterrupted(engine, which)
    state = engine.start(PROMPT, PARAMS[which])
    for limit in sorted(limits):
        engine.run(state, RunRequest(max_new_tokens=limit))
        assert len(state.generated_ids) == limit
        state = resume(engine, state, how)
    engine.run(state)
    assert state.generated_ids == reference


def test_it_leaves_no_forward_unused_when_a_run_ends_on_its_limit(engine):
    state = engine.start(PROMPT, PARAMS[0])
    before = engine.runner.forward_calls
    engine.run(state, RunRequest(max_new_tokens=5))
    assert engine.runner.forward_calls - before == 4  # five tokens drawn, the fifth not yet run
    assert state.pending == state.generated_ids[-1]
    alternatives = engine.signals(state).alternatives  # needs the fifth token's forward
    assert state.pending is None and engine.runner.forward_calls - before == 5
    fresh = engine.rebuild(Checkpoint(state.prompt_ids, state.generated_ids, state.params))
    assert [a.token_id for a in engine.signals(fresh).alternatives] == [
        a.token_id for a in alternatives
    ]


def test_a_rebuild_recomputes_one_signal_per_generated_token(engine):
    state = engine.start(PROMPT, PARAMS[1])
    engine.run(state, RunRequest(pause_at=12))
    rebuilt = resume(engine, state, "rebuild")
    assert len(rebuilt.top1_history) == len(rebuilt.entropy_history) == 12
    assert rebuilt.top1_history == pytest.approx(state.top1_history, abs=1e-4)
    assert rebuilt.entropy_history == pytest.approx(state.entropy_history, abs=1e-4)
