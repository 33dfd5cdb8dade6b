"""The rollback protocol's per-task defaults: a drift policy that goes "by task type" gets
the window and thresholds of the session's task type when the session starts."""

from __future__ import annotations

import pytest

from inference.policies import DRIFT_PRESETS, StepContext, build_policy, with_task_presets
from inference.signals import Signals
from reviewer import lifecycle
from reviewer.models import PausePolicy, ReviewSession
from tests.session_factory import clinical_notes, stub_worker

DRIFT = {"name": "Drift", "kind": "drift", "action": "rollback"}


def test_the_presets_are_the_designs():
    assert DRIFT_PRESETS["deterministic"]["entropy_threshold"] == 1.5
    assert DRIFT_PRESETS["reasoning"]["entropy_threshold"] == 2.1
    assert DRIFT_PRESETS["open"]["entropy_threshold"] == 2.8
    for preset in DRIFT_PRESETS.values():
        assert (preset["similarity_threshold"], preset["window"]) == (0.4, 3)


def test_a_policy_by_task_type_takes_its_types_preset_and_others_are_left_alone():
    by_type = {**DRIFT, "params": {"by_task_type": True, "entropy_threshold": 9.0}}
    fixed = {**DRIFT, "name": "Fixed", "params": {"entropy_threshold": 9.0}}
    keyword = {"name": "Words", "kind": "keyword", "params": {"keywords": ["x"]}}
    chosen, kept, words = with_task_presets([by_type, fixed, keyword], "deterministic")
    assert chosen["params"] == {"by_task_type": True, **DRIFT_PRESETS["deterministic"]}
    assert (kept, words) == (fixed, keyword)
    policy = build_policy(chosen)  # still a valid spec for the engine
    assert policy.params["window"] == 3 and policy.params["by_task_type"] is True


@pytest.mark.django_db
@pytest.mark.parametrize("task_type", ["deterministic", "open", "reasoning"])
def test_a_session_starts_with_its_task_types_drift_thresholds(alice, monkeypatch, task_type):
    stub_worker(monkeypatch)
    domain = clinical_notes()
    PausePolicy.objects.create(
        domain=domain, name="Drift", kind="drift", action="rollback", params={"by_task_type": True}
    )
    started = lifecycle.start_session(
        alice, domain.name, "Fever since Monday.", task_type=task_type
    )
    (spec,) = ReviewSession.objects.get(pk=started["id"]).policy_specs
    for key, value in DRIFT_PRESETS[task_type].items():
        assert spec["params"][key] == value


def window_with(entropy: float, similarity: float, tokens: int = 4) -> StepContext:
    """A calm first token, then three this uncertain and this unlike the prompt: the drift
    policy fires where a window first drifts, at the last one."""
    signals = Signals(top1_prob=0.2, entropy=entropy, margin=0.05, alternatives=())
    return StepContext(
        phase="after_token",
        position=tokens - 1,
        signals=signals,
        text="x" * tokens,
        new_text_start=tokens - 1,
        top1_history=[0.2] * tokens,
        entropy_history=[0.1] + [entropy] * (tokens - 1),
        similarity_history=[similarity] * tokens,
    )


def test_the_same_wandering_rolls_back_a_deterministic_task_and_not_open_writing():
    by_type = {**DRIFT, "params": {"by_task_type": True}}
    wandering = window_with(entropy=2.0, similarity=0.3)  # between the two presets' lines
    fired = {}
    for task_type in DRIFT_PRESETS:
        (spec,) = with_task_presets([by_type], task_type)
        fired[task_type] = build_policy(spec).evaluate(wandering) is not None
    assert fired == {"deterministic": True, "reasoning": False, "open": False}
    very = window_with(entropy=2.5, similarity=0.3)
    assert build_policy(with_task_presets([by_type], "reasoning")[0]).evaluate(very) is not None
