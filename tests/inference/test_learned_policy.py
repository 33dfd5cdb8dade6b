"""The learned policy kind: its spec, where it fires, and a real run that stops at the token
its model picks."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from inference.decode import RunRequest
from inference.learned.pause_features import HASH_BITS, hashed
from inference.learned.pause_model import PauseModel, save_model
from inference.policies import POLICY_KINDS, PolicyConfigError, PolicySet, StepContext
from inference.policies.dry_run import simulated_tokens, text_step
from inference.sink import CollectingSink, PauseNotice, TokenEvent
from tests.inference.pause_models import learned_spec, starter_model

SYSTEM = "You are a clinical documentation assistant."
PROMPT = "In one sentence, state the usual adult dose of paracetamol."
GREEDY = {"temperature": 0.0, "max_new_tokens": 24}


def fire(spec: dict, text: str) -> list[tuple[str, str]]:
    """(text so far, reason) at each firing while `text` is fed in simulated tokens."""
    policies = PolicySet.from_specs([spec])
    fed, fired = "", []
    for position, piece in enumerate(simulated_tokens(text)):
        for decision in policies.evaluate(text_step(fed + piece, len(fed), position)):
            fired.append((fed + piece, decision.reason))
        fed += piece
    return fired


def cue_spec(directory, feature: str) -> dict:
    """A learned-policy spec whose model scores only `feature`: 0.99 with it, 0.01 without."""
    weights = np.zeros(1 << HASH_BITS, dtype=np.float32)
    (index,), _ = hashed({feature: 1.0})
    weights[index] = 10.0
    path = save_model(PauseModel(weights, bias=-5.0, threshold=0.5), directory)
    return {"name": "cue", "kind": "learned", "params": {"model": str(path)}}


def test_it_is_a_kind_with_a_form_schema():
    schema = POLICY_KINDS["learned"].param_schema()
    assert schema["model"]["required"] and schema["model"]["type"] == "string"
    assert schema["threshold"]["nullable"] and schema["threshold"]["max"] == 1.0
    assert schema["checksum"]["nullable"]
    json.dumps(schema)


def test_it_takes_the_models_threshold_unless_the_spec_sets_one(tmp_path):
    (policy,) = PolicySet.from_specs([learned_spec(tmp_path)]).policies
    assert policy.threshold == starter_model().threshold
    (policy,) = PolicySet.from_specs([learned_spec(tmp_path, threshold=0.9)]).policies
    assert policy.threshold == 0.9
    assert policy.to_spec()["params"]["checksum"] == starter_model().checksum


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"model": "/nonexistent/x.pausemodel"}, "model", "cannot read pause model file"),
        ({"checksum": "ab" * 32}, "checksum", "has checksum"),
        ({"threshold": 1.5}, "threshold", "must be <= 1.0"),
        ({"model": 3}, "model", "must be a string"),
    ],
)
def test_it_refuses_a_spec_it_cannot_use(tmp_path, params, field, message):
    spec = learned_spec(tmp_path)
    spec["params"].update(params)
    with pytest.raises(PolicyConfigError, match=message) as caught:
        PolicySet.from_specs([spec])
    assert caught.value.field == field and caught.value.policy == "learned"


def test_it_refuses_a_file_that_is_not_a_model(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a model")
    spec = {"name": "l", "kind": "learned", "params": {"model": str(path)}}
    with pytest.raises(PolicyConfigError, match='"model" cannot be used: not a Caesura pause'):
        PolicySet.from_specs([spec])


def test_it_fires_once_where_a_dose_completes_not_on_its_digits(tmp_path):
    fired = fire(
        learned_spec(tmp_path),
        "The patient tolerated the procedure well. Start apixaban 5 mg twice daily. Review in clinic.",
    )
    assert len(fired) == 1
    text, reason = fired[0]
    assert text.endswith("apixaban 5 mg")
    assert reason.startswith("A reviewer would likely step in here (score ")
    assert "a number with a unit" in reason


def test_it_pauses_once_for_a_clause_that_stays_risky_across_a_number(tmp_path):
    """The step after "5|00" is compared with the last settled step, "definitely", which
    already paused, not with nothing."""
    spec = cue_spec(tmp_path, "cue:absolute")
    tokens = ["It", " is", " definitely", " 5", "00", " mg", " daily", "."]
    policies = PolicySet.from_specs([spec])
    fired, fed = [], ""
    for position, token in enumerate(tokens):
        if policies.evaluate(text_step(fed + token, len(fed), position)):
            fired.append(position)
        fed += token
    assert fired == [2]


def test_it_fires_on_chinese_and_stays_quiet_on_boilerplate(tmp_path):
    spec = learned_spec(tmp_path)
    ((text, _),) = fire(spec, "患者病情平稳。处理：口服阿莫西林0.5g，每日三次。")
    assert "阿莫西林0.5g" in text
    assert fire(spec, "本记录供主治医师审阅。已与患者及家属沟通治疗方案。") == []
    assert fire(spec, "This note was prepared for review by the attending physician. ") == []


def test_its_decision_explains_itself_in_evidence(tmp_path):
    policies = PolicySet.from_specs([learned_spec(tmp_path)])
    # where the clause turns risky (not at a later "2%": the pause was already here)
    text = "The Supplier shall pay liquidated damages"
    ctx = text_step(text, len("The Supplier shall pay liquidated"), 5)
    (decision,) = policies.evaluate(ctx)
    evidence = json.loads(json.dumps(decision.to_dict()))["evidence"]
    assert evidence["score"] >= evidence["threshold"] == starter_model().threshold
    assert evidence["model_checksum"] == starter_model().checksum
    assert 1 <= len(evidence["features"]) <= 3
    assert all(f["contribution"] > 0 and f["label"] for f in evidence["features"])
    assert decision.span == (0, len(text))


def test_it_compares_with_the_step_before_using_its_signals(tmp_path):
    """The rising edge reads the previous token's signals from the histories."""
    (policy,) = PolicySet.from_specs([learned_spec(tmp_path)]).policies
    base = text_step("Start apixaban 5 mg", len("Start apixaban 5"), 3)
    ctx = StepContext(**{**base.__dict__, "top1_history": [0.9, 0.8, 0.7, 0.6]})
    assert policy.evaluate(ctx) is not None


@pytest.mark.model
@pytest.mark.slow
def test_a_real_run_pauses_at_the_token_its_model_picks(real_engine, tmp_path):
    """Greedy SmolLM2: replay the learned policy over an uninterrupted run's own tokens and
    signals; the policy run must stop at exactly that token, with the same text, and resume
    to the uninterrupted text."""
    reference = real_engine.start(PROMPT, GREEDY, system=SYSTEM)
    sink = CollectingSink()
    real_engine.run(reference, RunRequest(sink))
    spec = learned_spec(tmp_path)
    expected = first_firing(spec, [e for e in sink.events if isinstance(e, TokenEvent)])
    assert expected is not None, reference.text

    state = real_engine.start(PROMPT, GREEDY, [spec], system=SYSTEM)
    sink = CollectingSink()
    stop = real_engine.run(state, RunRequest(sink))
    assert stop.reason == "pause"
    assert len(state.generated_ids) == expected + 1  # no token after the triggering one
    assert state.generated_ids == reference.generated_ids[: expected + 1]
    (notice,) = [e for e in sink.events if isinstance(e, PauseNotice)]
    assert notice.decisions[0].kind == "learned" and notice.decisions[0].policy == "learned"
    print(f"paused at token {expected}: {state.text!r} ({notice.reason})")
    assert re.search(r"\d\s*(mg|g|milligrams?|grams?)$", state.text), state.text

    real_engine.run(state)
    assert state.text == reference.text


def first_firing(spec: dict, events: list[TokenEvent]) -> int | None:
    """The first position where the policy fires when fed the reference run's steps."""
    policies = PolicySet.from_specs([spec])
    text, top1, entropy = "", [], []
    for event in events:
        text = text[: event.text_offset] + event.text
        top1.append(event.signals.top1_prob)
        entropy.append(event.signals.entropy)
        ctx = StepContext(
            "after_token", event.position, event.signals, text, event.text_offset,
            top1, entropy, [None] * len(top1),
        )  # fmt: skip
        if policies.evaluate(ctx):
            return event.position
    return None


def test_a_snapshot_restores_the_policy_with_its_model(engine, tmp_path):
    spec = learned_spec(tmp_path, threshold=0.5)
    state = engine.start("hello", {"temperature": 0.0, "max_new_tokens": 6}, [spec])
    engine.run(state, RunRequest(pause_at=3))
    restored = engine.restore(engine.snapshot(state))
    (policy,) = restored.policies.policies
    assert policy.kind == "learned" and policy.threshold == 0.5
    assert policy.model.checksum == starter_model().checksum
    engine.run(restored)
    assert len(restored.generated_ids) == 6
