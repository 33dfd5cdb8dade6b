"""Trying a policy on sample text: the page numbers only the pauses a live run would make,
and shows the rest as flags."""

from __future__ import annotations

from django.utils import translation

from reviewer.analytics.policy_trial import try_policies

SPECS = [
    {"name": "Low", "kind": "keyword", "params": {"keywords": ["definitely"]}},
    {"name": "High", "kind": "keyword", "params": {"keywords": ["definitely"]}, "priority": 5},
    {"name": "Note", "kind": "keyword", "params": {"keywords": ["stable"]}, "action": "flag"},
]
TEXT = "The patient is definitely stable now."


def test_it_numbers_only_the_pauses_and_shows_the_rest_as_flags():
    with translation.override("en"):
        trial = try_policies(SPECS, TEXT)
    assert [(p.number, p.policy, p.action) for p in trial.pauses] == [(1, "High", "pause")]
    assert [(f.policy, f.action, f.number) for f in trial.flags] == [
        ("Low", "flag", 0),  # outranked at the same token
        ("Note", "flag", 0),
    ]
    assert [s.stops for s in trial.segments if s.stops] == [[1]]


def test_it_keeps_to_the_budget_it_is_given():
    budget = {"per_100_tokens": 1, "min_distance": 0, "hold_until_first_word": True}
    text = "Definitely. It is definitely so."
    trial = try_policies(SPECS[1:2], text, budget)
    assert [p.matched for p in trial.pauses] == ["Definitely"]
    assert [f.matched for f in trial.flags] == ["definitely"]  # one pause per 100 tokens
    assert len(try_policies(SPECS[1:2], text).pauses) == 2  # no budget: both pause
