"""Pause policies: drift, cooldowns, their state across truncation and JSON, configuration
errors and the policy set."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.policies import (
    POLICY_KINDS,
    PolicyConfigError,
    PolicySet,
    StepContext,
    build_policy,
    scan_text,
    simulated_tokens,
)
from tests.inference.policy_steps import (
    before,
    feed,
    keyword,
    overconfidence,
    positions,
    sentences,
    signals,
    step,
    tool_call,
)

# drift


def drift(**params) -> dict:
    defaults = {"window": 3, "entropy_threshold": 2.5, "similarity_threshold": 0.5}
    return {
        "name": "drift",
        "kind": "drift",
        "params": {**defaults, "confidence_floor": 0.6, **params},
    }


def drift_step(top1s, entropies, similarities) -> StepContext:
    position = len(top1s) - 1
    return StepContext(
        "after_token", position, signals(top1s[-1]), "x" * len(top1s), position,
        top1s, entropies, similarities,
    )  # fmt: skip


def test_it_rolls_back_to_after_the_last_confident_token_before_the_window():
    top1s = [0.9, 0.7, 0.3, 0.4, 0.2, 0.1, 0.2]
    entropies = [0.5, 0.5, 0.5, 0.5, 3.0, 3.0, 3.0]
    similarities = [0.9, 0.9, 0.9, 0.9, 0.2, 0.3, 0.1]
    decision = build_policy(drift()).evaluate(drift_step(top1s, entropies, similarities))
    assert decision is not None and decision.action == "rollback"
    assert decision.rollback_to == 2  # token 1 (0.7 > 0.6) is kept; 2 and 3 are not confident
    assert decision.evidence["window"] == [4, 6]
    assert decision.evidence["mean_entropy"] == pytest.approx(3.0)
    assert decision.evidence["mean_similarity"] == pytest.approx(0.2)


def test_it_rolls_back_to_the_start_when_nothing_was_confident():
    decision = build_policy(drift()).evaluate(drift_step([0.1] * 4, [0.1] + [3.0] * 3, [0.2] * 4))
    assert decision.rollback_to == 0


def test_it_needs_both_high_entropy_and_low_similarity_for_drift():
    policy = build_policy(drift())
    assert policy.evaluate(drift_step([0.9] * 3, [3.0] * 3, [0.9] * 3)) is None
    assert policy.evaluate(drift_step([0.9] * 3, [0.5] * 3, [0.1] * 3)) is None
    assert policy.evaluate(drift_step([0.9] * 2, [3.0] * 2, [0.1] * 2)) is None  # window not full


def test_it_fires_drift_once_where_it_began():
    policy = build_policy(drift())
    assert policy.evaluate(drift_step([0.9] * 5, [0.1] + [3.0] * 4, [0.1] * 5)) is None


def test_it_skips_drift_without_hidden_state_similarities():
    policy = build_policy(drift())
    assert policy.evaluate(drift_step([0.9] * 3, [3.0] * 3, [0.1, None, 0.1])) is None
    assert PolicySet.from_specs([drift()]).needs_hidden_states


def test_it_reports_the_rollback_point_in_evidence_when_drift_only_pauses():
    decision = build_policy({**drift(), "action": "pause"}).evaluate(
        drift_step([0.9, 0.1, 0.1, 0.1], [0.1, 3.0, 3.0, 3.0], [0.9, 0.1, 0.1, 0.1])
    )
    assert decision.rollback_to is None and decision.evidence["rollback_to"] == 1


# cooldown, state


def test_it_applies_a_cooldown_in_tokens():
    spec = {**keyword("risk", whole_word=False), "cooldown": 2}
    fired = feed([spec], ["risk", "risk", "risk", "risk", "risk"])
    assert positions(fired) == [0, 3]


def test_it_fires_at_most_once_per_position_when_a_step_is_evaluated_again():
    policies = PolicySet.from_specs([{"name": "unsure", "kind": "low_confidence"}])
    assert len(policies.evaluate(before(top1=0.1, position=4))) == 1
    assert policies.evaluate(before(top1=0.1, position=4)) == []  # resumed at the same token
    assert len(policies.evaluate(before(top1=0.1, position=5))) == 1


def test_it_round_trips_its_state_through_json():
    specs = [keyword("risk", whole_word=False) | {"cooldown": 5}]
    policies = PolicySet.from_specs(specs)
    policies.evaluate(step("risk", 0, position=0))
    state = json.loads(json.dumps(policies.state_dict()))
    restored = PolicySet.from_specs(specs)
    restored.load_state_dict(state)
    assert restored.state_dict() == policies.state_dict()
    assert restored.evaluate(step("riskrisk", 4, position=3)) == []  # still cooling down
    assert len(PolicySet.from_specs(specs).evaluate(step("riskrisk", 4, position=3))) == 1


def test_it_forgets_firings_at_and_after_a_truncated_position():
    policies = PolicySet.from_specs([{"name": "unsure", "kind": "low_confidence", "cooldown": 100}])
    policies.evaluate(before(top1=0.1, position=3))
    policies.truncate(4)
    assert policies.evaluate(before(top1=0.1, position=5)) == []
    policies.truncate(3)
    assert policies.state_dict()["fired"]["unsure"] == []
    assert len(policies.evaluate(before(top1=0.1, position=3))) == 1


def test_it_fires_overconfidence_once_per_word_however_long_it_stays_confident():
    chunks = ["It ", "is ", "guaranteed", " to", " work", " fine"]
    assert positions(feed([overconfidence()], chunks, top1=0.99)) == [3]


def test_it_round_trips_specs_with_defaults_filled_in():
    policies = PolicySet.from_specs(
        [keyword("a"), {**keyword("b"), "name": "off", "enabled": False}]
    )
    (spec,) = policies.to_specs()
    assert spec["params"] == {"keywords": ["a"], "case_sensitive": False, "whole_word": True}
    assert PolicySet.from_specs(policies.to_specs()).to_specs() == policies.to_specs()


# configuration errors


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"name": "p1", "kind": "telepathy"}, r'Policy "p1": unknown kind .telepathy.'),
        (
            {"name": "p2", "kind": "keyword"},
            r'Policy "p2" \(keyword\): parameter "keywords" is required',
        ),
        (
            {"name": "p3", "kind": "low_confidence", "params": {"threshold": 1.5}},
            r'Policy "p3" \(low_confidence\): parameter "threshold" must be <= 1.0, not 1.5',
        ),
        (
            {"name": "p4", "kind": "keyword", "action": "explode", "params": {"keywords": ["a"]}},
            r'Policy "p4" \(keyword\): action .explode. must be "pause" or "flag"',
        ),
        (
            {"name": "p5", "kind": "keyword", "cooldown": -1, "params": {"keywords": ["a"]}},
            r'Policy "p5" \(keyword\): "cooldown" must be a whole number of tokens >= 0',
        ),
        (
            {"name": "p6", "kind": "keyword", "action": "rollback", "params": {"keywords": ["a"]}},
            r'Policy "p6" \(keyword\): action .rollback.',
        ),
        (
            {"name": "p7", "kind": "high_entropy", "params": {"threshold": 0}},
            r'Policy "p7" \(high_entropy\): parameter "threshold" must be > 0.0',
        ),
        (
            {"name": "p8", "kind": "sentence_count", "params": {"every": 0}},
            r'Policy "p8" \(sentence_count\): parameter "every" must be >= 1',
        ),
        (
            {"name": "p9", "kind": "keyword", "params": {"keywords": "a"}},
            r'Policy "p9" \(keyword\): parameter "keywords" must be a non-empty list of strings',
        ),
        (
            {"name": "p10", "kind": "keyword", "params": {"keywords": ["a"], "wholeword": True}},
            r'Policy "p10" \(keyword\): unknown parameter "wholeword"',
        ),
        (
            {"name": "p11", "kind": "low_confidence", "params": {"threshold": True}},
            r'Policy "p11" \(low_confidence\): parameter "threshold" must be a number',
        ),
        ({"kind": "keyword"}, r'A policy \(keyword\) needs a non-empty "name"'),
        (
            {"name": "p12", "kind": "keyword", "cooldwn": 3},
            r'Policy "p12": unknown field\(s\) cooldwn',
        ),
    ],
)
def test_it_rejects_bad_specs_with_a_message_naming_the_policy(spec, message):
    with pytest.raises(PolicyConfigError, match=message):
        build_policy(spec)


def test_it_names_the_field_on_configuration_errors():
    with pytest.raises(PolicyConfigError) as error:
        build_policy({"name": "p", "kind": "drift", "params": {"window": 2.5}})
    assert (error.value.policy, error.value.field) == ("p", "window")


def test_it_rejects_duplicate_policy_names():
    with pytest.raises(PolicyConfigError, match='"kw" is used twice'):
        PolicySet.from_specs([keyword("a"), keyword("b")])


def test_it_describes_every_kind_for_an_admin_form():
    assert set(POLICY_KINDS) == {
        "keyword", "regex", "low_confidence", "high_entropy",
        "overconfidence", "sentence_count", "tool_call", "drift", "learned",
    }  # fmt: skip
    for cls in POLICY_KINDS.values():
        json.dumps(cls.param_schema())
    schema = POLICY_KINDS["overconfidence"].param_schema()
    assert schema["threshold"]["default"] == 0.92 and schema["threshold"]["max"] == 1.0
    assert "毫无疑问" in schema["words"]["default"]
    assert schema["threshold"]["required"] is False
    assert POLICY_KINDS["keyword"].param_schema()["keywords"]["required"] is True


def test_it_serializes_decisions_to_json():
    (_, decision), *_ = feed([keyword("risk")], ["risk "])
    data = json.loads(json.dumps(decision.to_dict()))
    assert data["span"] == [0, 4] and data["policy"] == "kw" and data["kind"] == "keyword"


# the demo policies


def test_it_builds_the_demo_policies():
    specs = [
        keyword("recommend", "建议") | {"name": "clinical-recommend"},
        {"name": "clinical-unsure", "kind": "low_confidence", "params": {"threshold": 0.35}},
        {"name": "clinical-sure", "kind": "overconfidence"},
        keyword("force majeure", "不可抗力") | {"name": "contract-fm"},
        keyword("liability", "违约责任") | {"name": "contract-liability"},
        sentences(1, 3) | {"name": "underwriting-sentences"},
        keyword("processor") | {"name": "patent-processor"},
    ]
    assert len(PolicySet.from_specs(specs).policies) == 7


# scan_text


def test_it_scans_sample_text_with_the_text_policies():
    specs = [
        keyword("recommend", "建议"),
        sentences(),
        tool_call(),
        {"name": "unsure", "kind": "low_confidence"},
    ]
    text = 'I recommend rest. 我建议休息。{"action": "book"} I recommend'
    decisions = scan_text(specs, text)
    assert [(d.policy, text[d.span[0] : d.span[1]]) for d in decisions] == [
        ("kw", "recommend"),
        ("sentences", "I recommend rest."),
        ("kw", "建议"),
        ("sentences", "我建议休息。"),
        ("tool", '{"action": "book"}'),
        ("kw", "recommend"),  # the end of the sample counts as a word boundary
    ]


def test_it_validates_every_spec_when_scanning():
    with pytest.raises(PolicyConfigError, match="threshold"):
        scan_text([{"name": "x", "kind": "low_confidence", "params": {"threshold": 2}}], "text")


def test_it_splits_sample_text_like_tokens_without_losing_characters():
    text = "Dr. Smith, 3.5mg  每天\n两次!"
    assert "".join(simulated_tokens(text)) == text
    assert simulated_tokens("I recommend 建议") == ["I", " recommend", " 建", "议"]


# chunking property

WORDS = ["processor", "processors", "the", "a", "multiprocessor", "processor-based", "x", "处理器"]


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=12),
    separators=st.lists(st.sampled_from([" ", ", ", ". ", "\n", "("]), min_size=12, max_size=12),
    cuts=st.sets(st.integers(min_value=1, max_value=200)),
    whole_word=st.booleans(),
)
def test_it_fires_once_per_occurrence_in_any_chunking(words, separators, cuts, whole_word):
    text = "".join(w + s for w, s in zip(words, separators, strict=False))
    bounds = [0, *sorted(c for c in cuts if c < len(text)), len(text)]
    chunks = [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    fired = feed([keyword("processor", whole_word=whole_word)], chunks)
    reported = [(p, tuple(o)) for p, d in fired for o in d.evidence["occurrences"]]
    expected = expected_occurrences(text, whole_word)
    assert [span for _, span in reported] == expected
    assert [p for p, _ in reported] == [
        settled_chunk(chunks, end, whole_word) for _, end in expected
    ]


def expected_occurrences(text: str, whole_word: bool) -> list[tuple[int, int]]:
    found = []
    start = text.find("processor")
    while start != -1:
        end = start + len("processor")
        before_ok = start == 0 or not text[start - 1].isalnum()
        after_ok = end < len(text) and not text[end].isalnum()
        if not whole_word or (before_ok and after_ok):
            found.append((start, end))
        start = text.find("processor", end)
    return found


def settled_chunk(chunks: list[str], end: int, whole_word: bool) -> int:
    """Index of the chunk in which the occurrence ending at `end` is settled."""
    settled = end + 1 if whole_word else end
    total = 0
    for i, chunk in enumerate(chunks):
        total += len(chunk)
        if total >= settled:
            return i
    raise AssertionError("occurrence past the end")
