"""Replaying policies over a recorded generation finds the stops a live run makes."""

from __future__ import annotations

import json
import statistics

import pytest

from inference.decode import RunRequest
from inference.policies import (
    PolicySet,
    RecordedToken,
    build_policy,
    has_similarity,
    replay,
    unreplayable,
)
from inference.sink import CollectingSink, TokenEvent
from inference.transformers_backend.engine import Engine
from tests.inference.test_policies import before

PROMPT = "We recommend a follow-up visit."
PARAMS = {"temperature": 0.8, "seed": 5, "max_new_tokens": 40}


def token(text: str, top1: float = 0.9, entropy: float = 0.5, similarity=None) -> RecordedToken:
    return RecordedToken(text, top1, entropy, similarity=similarity)


def live_stops(engine, specs, prompt=PROMPT, params=PARAMS) -> list[tuple[int, tuple[str, ...]]]:
    """(position, policies) of every pause of a run resumed until it ends."""
    state = engine.start(prompt, params, specs)
    stops = []
    while (stop := engine.run(state)).reason == "pause":
        stops.append((stop.position, tuple(d.policy for d in stop.decisions)))
    return stops


def recorded(engine, prompt=PROMPT, params=PARAMS) -> list[RecordedToken]:
    """The tokens of a run without policies, read back from their events' JSON."""
    sink = CollectingSink()
    engine.run(engine.start(prompt, params), RunRequest(sink))
    stored = [json.loads(json.dumps(e.to_dict())) for e in sink.of(TokenEvent)]
    return [RecordedToken.from_event(payload) for payload in stored]


def replayed_pauses(specs, tokens) -> list[tuple[int, tuple[str, ...]]]:
    stops = replay(specs, tokens)
    return [(s.position, tuple(d.policy for d in s.decisions)) for s in stops if s.pauses]


def recording(engine) -> Engine:
    """The same model, recording every token's similarity to the prompt."""
    return Engine(engine.runner, engine.tokenizer, record_similarity=True)


def drift_at_medians(tokens, window: int) -> list[dict]:
    """A drift policy that pauses, its thresholds at the run's median entropy and similarity
    so that it fires now and then."""
    params = {
        "window": window,
        "entropy_threshold": statistics.median(t.entropy for t in tokens),
        "similarity_threshold": statistics.median(t.similarity for t in tokens),
    }
    return [{"name": "wander", "kind": "drift", "action": "pause", "params": params}]


def test_it_finds_the_pauses_a_live_run_makes(engine):
    tokens = recorded(engine)
    median_top1 = sorted(t.top1_prob for t in tokens)[len(tokens) // 2]
    specs = [
        {"name": "unsure", "kind": "low_confidence", "params": {"threshold": median_top1}},
        {"name": "letter", "kind": "regex", "params": {"pattern": "[a-z]"}, "cooldown": 3},
        {"name": "calm", "kind": "low_confidence", "params": {"threshold": 1.0}, "cooldown": 7},
    ]
    replayed = replayed_pauses(specs, tokens)
    assert len(replayed) >= 3
    assert replayed == live_stops(engine, specs)


def test_a_token_event_carries_the_similarity_its_forward_measured(engine):
    sink, watching = CollectingSink(), recording(engine)
    state = watching.start(PROMPT, PARAMS)
    watching.run(state, RunRequest(sink))
    similarity = [e.similarity for e in sink.of(TokenEvent)]
    assert None not in similarity and similarity == state.similarity_history
    plain = CollectingSink()
    engine.run(engine.start(PROMPT, PARAMS), RunRequest(plain))
    assert plain.tokens == sink.tokens  # recording it changes no token
    assert {e.similarity for e in plain.of(TokenEvent)} == {None}


def test_it_replays_drift_where_a_live_run_pauses(engine):
    """Similarity recorded by a run without drift: where drift, once enabled, pauses."""
    tokens = recorded(recording(engine))
    assert has_similarity(tokens)
    specs = drift_at_medians(tokens, window=3)
    replayed = replayed_pauses(specs, tokens)
    assert len(replayed) >= 2
    assert replayed == live_stops(engine, specs)


CLINICAL = "Write a short clinical note about a patient with high blood pressure and chest pain."


@pytest.mark.slow
@pytest.mark.model
def test_it_replays_drift_where_the_real_model_pauses(real_engine):
    params = {"temperature": 0.9, "seed": 3, "max_new_tokens": 120}
    tokens = recorded(recording(real_engine), CLINICAL, params)
    specs = drift_at_medians(tokens, window=6)
    replayed = replayed_pauses(specs, tokens)
    assert len(replayed) >= 3
    assert replayed == live_stops(real_engine, specs, CLINICAL, params)


def test_it_replays_cooldowns_and_text_offsets():
    tokens = [token(" a", top1=0.2), token(" b", top1=0.2), token(" c", top1=0.2), token(".")]
    specs = [{"name": "u", "kind": "low_confidence", "params": {"threshold": 0.3}, "cooldown": 1}]
    stops = replay(specs, tokens)
    assert [(s.position, s.phase, s.offset) for s in stops] == [
        (0, "before_token", 0),
        (2, "before_token", 4),
    ]
    assert all(s.pauses for s in stops)


def test_it_replays_overconfidence_after_absolute_wording():
    tokens = [token(" It"), token(" is"), token(" definitely", top1=0.5), token(" safe", 0.97)]
    stops = replay([{"name": "sure", "kind": "overconfidence"}], tokens)
    assert [(s.position, s.phase) for s in stops] == [(4, "after_token")]
    assert stops[0].decisions[0].span == (7, 17)  # " It is definitely"


def test_it_leaves_out_drift_when_no_similarity_was_recorded():
    specs = [
        {"name": "d", "kind": "drift", "params": {"window": 2}},
        {"name": "u", "kind": "low_confidence"},
    ]
    tokens = [token(" x", 0.1, 4.0), token(" y", 0.1, 4.0), token(" z", 0.1, 4.0)]
    assert unreplayable(specs, tokens) == ["d"]
    assert {d.policy for s in replay(specs, tokens) for d in s.decisions} == {"u"}
    with_similarity = [token(t.text, 0.1, 4.0, similarity=0.1) for t in tokens]
    assert unreplayable(specs, with_similarity) == []
    kinds = {d.kind for s in replay(specs, with_similarity) for d in s.decisions}
    assert kinds == {"drift", "low_confidence"}


def test_it_reads_a_stored_token_event():
    payload = {"text": " ok", "signals": {"top1_prob": 0.4, "entropy": 1.5, "margin": 0.1}}
    assert RecordedToken.from_event(payload) == RecordedToken(" ok", 0.4, 1.5, 0.1)
    measured = RecordedToken.from_event({**payload, "similarity": 0.25})
    assert measured.similarity == 0.25
    with pytest.raises(KeyError):
        RecordedToken.from_event({"text": " ok"})


@pytest.mark.parametrize(
    ("top1", "expected"),
    [
        (0.3497, "Top-1 probability 0.3497 is below 0.3500"),
        (0.34999999, "Top-1 probability 0.34999999 is below 0.35"),
        (0.2, "Top-1 probability 0.20 is below 0.35"),
    ],
)
def test_a_reason_shows_the_digits_that_tell_the_numbers_apart(top1, expected):
    spec = {"name": "u", "kind": "low_confidence", "params": {"threshold": 0.35}}
    decision = build_policy(spec).evaluate(before(top1=top1))
    assert decision is not None and decision.reason == expected


def test_a_policy_set_replays_like_a_fresh_one():
    specs = [{"name": "u", "kind": "low_confidence", "params": {"threshold": 0.5}}]
    tokens = [token(" a", 0.1)] * 3
    assert len(replay(specs, tokens)) == len(replay(specs, tokens)) == 3
    assert len(PolicySet.from_specs(specs).policies) == 1
