"""The pause budget: few policy pauses, far apart, none before the first word; the rest flags."""

from __future__ import annotations

import pytest

from inference.control import ControlHandle
from inference.decode import RunRequest
from inference.policies import Decision, PauseBudget, PolicyConfigError, PolicySet, build_policy
from inference.sink import CollectingSink, FlagEvent, PauseNotice
from inference.state import Checkpoint
from reviewer.lifecycle.record import engine_meta as session_meta

PROMPT = "We recommend a follow-up visit."
PARAMS = {"temperature": 0.8, "seed": 5, "max_new_tokens": 60}
EVERY_TOKEN = {"name": "every", "kind": "regex", "params": {"pattern": r"\S"}}


def decision(policy: str) -> Decision:
    return Decision(policy, "regex", "pause", f"{policy} fired", {})


def policy_set(budget: PauseBudget, *specs: dict) -> PolicySet:
    return PolicySet.from_specs(list(specs) or [EVERY_TOKEN], budget)


def test_it_validates_a_budget():
    assert PauseBudget.from_dict(None) == PauseBudget()
    assert PauseBudget.from_dict({"per_100_tokens": 3, "min_distance": 20}).min_distance == 20
    with pytest.raises(PolicyConfigError, match='"min_distance" must be a whole number >= 0'):
        PauseBudget.from_dict({"min_distance": -1})
    with pytest.raises(PolicyConfigError, match='unknown field "rate"'):
        PauseBudget.from_dict({"rate": 1})
    with pytest.raises(PolicyConfigError, match="true or false"):
        PauseBudget(hold_until_first_word="yes")  # type: ignore[arg-type]


def test_a_spec_carries_priority_and_the_first_word_option():
    policy = build_policy({**EVERY_TOKEN, "priority": 5, "may_pause_before_first_word": True})
    assert (policy.priority, policy.may_pause_before_first_word) == (5, True)
    assert build_policy(policy.to_spec()).to_spec() == policy.to_spec()
    with pytest.raises(PolicyConfigError, match='"priority" must be a whole number'):
        build_policy({**EVERY_TOKEN, "priority": 1.5})
    with pytest.raises(PolicyConfigError, match='"may_pause_before_first_word" must be true'):
        build_policy({**EVERY_TOKEN, "may_pause_before_first_word": 1})


def test_the_highest_priority_pauses_and_the_others_become_flags():
    low = {**EVERY_TOKEN, "name": "low"}
    high = {**EVERY_TOKEN, "name": "high", "priority": 2}
    policies = policy_set(PauseBudget(), low, high)
    winner, flags = policies.arbitrate([decision("low"), decision("high")], 5, "Some text ")
    assert winner is not None and winner.policy == "high"
    assert [(f.policy, f.action) for f in flags] == [("low", "flag")]
    assert flags[0].evidence["budget"]["rule"] == "priority"
    assert flags[0].reason == 'low fired (not paused: "high" paused here)'


def test_no_policy_pauses_before_the_first_word_unless_its_spec_says_so():
    early = {**EVERY_TOKEN, "name": "early", "may_pause_before_first_word": True}
    policies = policy_set(PauseBudget(hold_until_first_word=True), EVERY_TOKEN, early)
    for text in ("", " ", "**", "\n- "):
        winner, flags = policies.arbitrate([decision("every")], 1, text)
        assert winner is None and flags[0].evidence["budget"]["rule"] == "first_word"
        winner, _ = policies.arbitrate([decision("early")], 1, text)
        assert winner is not None
    for text in ("The", "患", "3"):
        assert policies.arbitrate([decision("every")], 1, text)[0] is not None


def test_it_keeps_a_distance_after_any_pause_and_a_rate_per_100_tokens():
    policies = policy_set(PauseBudget(per_100_tokens=2, min_distance=10))
    policies.note_pause(5, policy=False)  # a manual pause counts for the distance only
    assert policies.arbitrate([decision("every")], 14, "a ")[0] is None
    assert policies.arbitrate([decision("every")], 15, "a ")[0] is not None
    policies.note_pause(15, policy=True)
    policies.note_pause(30, policy=True)
    _, flags = policies.arbitrate([decision("every")], 60, "a ")
    assert "2 pauses in the last 100 tokens" in flags[0].reason
    assert policies.arbitrate([decision("every")], 116, "a ")[0] is not None  # 15 left the window


def test_an_engine_run_spends_the_budget_and_flags_the_rest(engine):
    budget = PauseBudget(per_100_tokens=3, min_distance=8, hold_until_first_word=True)
    reference = engine.start(PROMPT, PARAMS)
    engine.run(reference)
    state = engine.start(PROMPT, PARAMS, [EVERY_TOKEN], budget=budget)
    sink = CollectingSink()
    pauses = []
    while (stop := engine.run(state, RunRequest(sink))).reason == "pause":
        pauses.append(stop.position)
    assert state.generated_ids == reference.generated_ids  # pauses change nothing
    assert len(pauses) == 3 and all(b - a >= 8 for a, b in zip(pauses, pauses[1:], strict=False))
    refused = [e for e in sink.of(FlagEvent) if "budget" in e.decision.evidence]
    assert refused and all("not paused" in e.decision.reason for e in refused)
    assert all(e.decision.action == "flag" for e in refused)
    assert len(sink.of(PauseNotice)) == 3


def test_manual_pauses_are_never_limited(engine):
    budget = PauseBudget(per_100_tokens=1, min_distance=50, hold_until_first_word=True)
    state = engine.start(PROMPT, PARAMS, [EVERY_TOKEN], budget=budget)
    assert engine.run(state, RunRequest(pause_at=0)).reason == "pause"
    control = ControlHandle()
    control.request_pause()
    stop = engine.run(state, RunRequest(control=control))
    assert (stop.reason, stop.decision.kind, stop.position) == ("pause", "manual", 0)
    assert engine.run(state, RunRequest(pause_at=2)).position == 2


def test_a_restored_or_rebuilt_state_keeps_counting(engine):
    budget = PauseBudget(per_100_tokens=10, min_distance=25, hold_until_first_word=True)
    state = engine.start(PROMPT, PARAMS, [EVERY_TOKEN], budget=budget)
    first = engine.run(state)
    assert first.reason == "pause"
    record = Checkpoint.from_dict(state.to_checkpoint().to_dict())
    assert record.budget == budget.to_dict()
    for copy in (engine.restore(engine.snapshot(state)), engine.rebuild(record)):
        assert copy.policies.budget == budget
        second = engine.run(copy)
        assert second.reason != "pause" or second.position - first.position >= 25


def test_muted_policies_stop_firing_and_survive_a_checkpoint(engine):
    state = engine.start(PROMPT, PARAMS, [EVERY_TOKEN])
    assert engine.run(state).reason == "pause"
    state.policies.mute(["every"])
    sink = CollectingSink()
    assert engine.run(state, RunRequest(sink)).reason in {"eos", "max_tokens"}
    assert not sink.of(FlagEvent) and not sink.of(PauseNotice)
    record = Checkpoint.from_dict(state.to_checkpoint().to_dict())
    assert record.muted == ["every"] and "muted" not in session_meta(record)
    assert engine.rebuild(record).policies.muted == {"every"}
    assert engine.restore(engine.snapshot(state)).policies.muted == {"every"}
