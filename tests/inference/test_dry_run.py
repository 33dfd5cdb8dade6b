"""The dry run over sample text routes each step as a live run does: one pause per token, the
highest priority first, within the pause budget; the rest are flags."""

from __future__ import annotations

from inference.policies import RecordedToken, replay, scan_text, simulated_tokens

BUDGET = {"per_100_tokens": 0, "min_distance": 3, "hold_until_first_word": True}


def spec(name: str, word: str, **extra) -> dict:
    return {"name": name, "kind": "keyword", "params": {"keywords": [word]}, **extra}


def actions(specs: list[dict], text: str) -> list[tuple]:
    return [(d.policy, d.action, d.evidence["position"]) for d in scan_text(specs, text)]


def test_it_pauses_once_per_token_and_by_priority():
    specs = [
        spec("low", "definitely"),
        spec("high", "definitely", priority=5),
        spec("noted", "stable", action="flag"),
    ]
    assert actions(specs, "The patient is definitely stable now.") == [
        ("high", "pause", 4),  # " definitely" is whole once " stable" follows
        ("low", "flag", 4),  # outranked: the engine pauses once per token
        ("noted", "flag", 5),
    ]


def test_it_keeps_to_the_pause_budget():
    specs = [spec("kw", "one"), spec("kw2", "two"), spec("kw3", "four")]
    decisions = scan_text(specs, "one two three four five", BUDGET)
    assert [(d.policy, d.action) for d in decisions] == [
        ("kw", "pause"),
        ("kw2", "flag"),  # two tokens after the pause; the budget asks for three
        ("kw3", "pause"),
    ]
    assert decisions[1].evidence["budget"]["rule"] == "budget"


def test_it_pauses_where_the_engine_s_replay_of_the_same_tokens_pauses():
    specs = [
        spec("a", "rest", priority=1),
        spec("b", "rest"),
        {"name": "s", "kind": "sentence_count", "params": {"every": 1}},
    ]
    text = "Give rest. Then more rest. Rest again, and rest."
    tokens = [RecordedToken(t, 1.0, 0.0, 1.0) for t in [*simulated_tokens(text), "\n"]]
    engine = [
        (s.position, d.policy)
        for s in replay(specs, tokens, BUDGET)
        for d in s.decisions
        if d.action == "pause"
    ]
    decisions = scan_text(specs, text, BUDGET)
    dry = [(d.evidence["position"] + 1, d.policy) for d in decisions if d.action == "pause"]
    assert dry == engine and len(engine) > 1
    assert len(decisions) > len(dry)  # the others are there, as flags
