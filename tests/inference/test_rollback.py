"""Drift rollbacks: truncate, resample with a new attempt, circuit breaker after two."""

from __future__ import annotations

from inference.decode import DeliveryFloor, RunRequest
from inference.sink import CollectingSink, FlagEvent, RollbackEvent, TokenEvent
from inference.state import Checkpoint

STEP_PATHS = ("eager", "compiled")  # each test on both decode steps (conftest.py)

PROMPT = "The patient should take aspirin."
PARAMS = {"temperature": 0.9, "seed": 21, "max_new_tokens": 12}
# Extreme thresholds: every full window has "drifted", so drift fires whenever it can.
DRIFT = {
    "name": "drift",
    "kind": "drift",
    "action": "rollback",
    "params": {
        "window": 3,
        "entropy_threshold": 0.001,
        "similarity_threshold": 1.0,
        "confidence_floor": 1.0,
    },
}


def test_it_rolls_back_twice_then_decodes_conservatively(engine):
    state = engine.start(PROMPT, PARAMS, [DRIFT])
    sink = CollectingSink()
    assert engine.run(state, RunRequest(sink)).reason == "max_tokens"

    rollbacks = sink.of(RollbackEvent)
    assert [(r.removed_from, r.removed_to, r.attempt) for r in rollbacks] == [(0, 3, 1), (0, 3, 2)]
    assert [r.conservative for r in rollbacks] == [False, True]
    assert all(len(r.removed_ids) == 3 and r.decision.kind == "drift" for r in rollbacks)
    assert rollbacks[0].to_dict()["decision"]["evidence"]
    # the breaker is open: the next drift is only reported
    assert [f.decision.kind for f in sink.of(FlagEvent)][:1] == ["drift"]
    assert (state.rollbacks, state.attempt, state.conservative) == (2, 2, True)
    assert state.effective_params.temperature == 0.3
    assert all(s is not None for s in state.similarity_history)

    # tokens of the abandoned attempts were reported, then replaced by resampled ones
    tokens = sink.of(TokenEvent)
    assert [t.attempt for t in tokens[:3]] == [0, 0, 0] and tokens[-1].attempt == 2
    assert [t.token_id for t in tokens[:3]] != state.generated_ids[:3]


def test_the_resampled_tokens_depend_only_on_seed_position_and_attempt(engine):
    state = engine.start(PROMPT, PARAMS, [DRIFT])
    engine.run(state)
    again = engine.rebuild(
        Checkpoint(state.prompt_ids, [], PARAMS, [DRIFT], attempt=2, rollbacks=2)
    )
    engine.run(again)
    assert again.generated_ids == state.generated_ids


def test_a_paused_rollback_state_survives_a_snapshot(engine):
    state = engine.start(PROMPT, PARAMS, [DRIFT])
    engine.run(state, RunRequest(pause_at=5))  # after the two rollbacks
    restored = engine.restore(engine.snapshot(state))
    assert (restored.rollbacks, restored.attempt, restored.conservative) == (2, 2, True)
    engine.run(state)
    engine.run(restored)
    assert restored.generated_ids == state.generated_ids


def rollbacks_under(engine, floor: DeliveryFloor) -> tuple[CollectingSink, object]:
    state = engine.start(PROMPT, PARAMS, [DRIFT])
    sink = CollectingSink()
    engine.run(state, RunRequest(sink, floor=floor))
    return sink, state


def test_it_never_rolls_back_into_text_already_delivered(engine):
    """Drift fires at the third token and would cut back to the first: one character was
    delivered before the run, so the rollback is reported as a flag and nothing is cut."""
    sink, state = rollbacks_under(engine, DeliveryFloor(released=1))
    assert sink.of(RollbackEvent) == [] and state.rollbacks == 0
    assert [f.decision.kind for f in sink.of(FlagEvent)][:1] == ["drift"]
    tokens = sink.of(TokenEvent)
    assert [t.token_id for t in tokens] == state.generated_ids  # nothing taken back


def test_it_keeps_what_delayed_delivery_may_have_sent_meanwhile(engine):
    """No sentence delay: every character is sendable as soon as it exists, so no automatic
    rollback may happen; three sentences behind, the tiny model's text sends nothing and
    the rollbacks go on as without a floor."""
    sink, state = rollbacks_under(engine, DeliveryFloor(delay_sentences=0))
    assert sink.of(RollbackEvent) == [] and state.text.strip()
    sink, state = rollbacks_under(engine, DeliveryFloor(delay_sentences=3))
    assert len(sink.of(RollbackEvent)) == 2
