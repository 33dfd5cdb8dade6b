"""Pause policies: each text kind fires once, at the token that triggers it, and only then."""

from __future__ import annotations

import time

import pytest

from inference.policies import (
    PolicyConfigError,
    PolicySet,
    build_policy,
    simulated_tokens,
)
from tests.inference.policy_steps import (
    before,
    feed,
    keyword,
    overconfidence,
    positions,
    sentences,
    step,
    tool_call,
)

# keyword


def test_it_fires_on_a_keyword_at_the_token_that_completes_it():
    fired = feed([keyword("liability")], ["The ", "lia", "bility", " clause"])
    assert positions(fired) == [3]  # " clause" shows "liability" is a whole word
    decision = fired[0][1]
    assert decision.span == (4, 13)
    assert decision.reason == 'Keyword "liability" appeared'
    assert decision.evidence["matched"] == "liability"


def test_it_fires_in_the_same_token_when_punctuation_follows_the_keyword():
    fired = feed([keyword("recommend")], ["I ", "recommend.", " Rest"])
    assert positions(fired) == [1]


def test_it_does_not_fire_without_the_keyword():
    assert feed([keyword("recommend")], ["Rest ", "and ", "fluids."]) == []


def test_it_does_not_match_inside_a_longer_word_with_whole_word():
    assert feed([keyword("recommend")], ["It ", "is ", "recommend", "ed", "."]) == []
    assert feed([keyword("liability")], ["nonliability "]) == []


def test_it_matches_inside_longer_words_without_whole_word():
    fired = feed([keyword("recommend", whole_word=False)], ["It ", "is ", "recommended"])
    assert positions(fired) == [2]


def test_it_ignores_case_unless_asked():
    assert positions(feed([keyword("Force Majeure")], ["FORCE majeure "])) == [0]
    assert feed([keyword("Force Majeure", case_sensitive=True)], ["force majeure "]) == []


def test_it_folds_case_fully_and_takes_either_form_of_an_accent():
    assert positions(feed([keyword("Straße")], ["die ", "STRASSE", " hier"])) == [2]
    decomposed, composed = "cafe\u0301", "caf\u00e9"
    assert positions(feed([keyword(composed)], ["un ", decomposed, " noir"])) == [2]
    assert positions(feed([keyword(decomposed)], ["un ", composed, " noir"])) == [2]


def test_it_matches_a_phrase_across_line_breaks():
    assert positions(feed([keyword("force majeure")], ["force", "\n", "majeure", " "])) == [3]


def test_it_matches_chinese_keywords_inside_chinese_text():
    fired = feed([keyword("不可抗力", "违约责任")], ["因", "不可", "抗力", "免除", "违约", "责任"])
    assert positions(fired) == [2, 5]
    assert [d.evidence["keyword"] for _, d in fired] == ["不可抗力", "违约责任"]


def test_it_fires_once_per_token_reporting_every_occurrence_it_completes():
    fired = feed([keyword("processor")], ["a processor, processor ", "and processor;"])
    assert positions(fired) == [0, 1]
    assert fired[0][1].evidence["occurrences"] == [[2, 11], [13, 22]]


# regex


def regex_spec(pattern: str, flags: str = "") -> dict:
    return {"name": "dose", "kind": "regex", "params": {"pattern": pattern, "flags": flags}}


def test_it_fires_on_a_regex_match_ending_in_the_newest_token():
    fired = feed([regex_spec(r"\d+ ?mg", "i")], ["Take ", "50", " MG", " daily", " now"])
    assert positions(fired) == [2]
    assert fired[0][1].span == (5, 10)
    assert fired[0][1].evidence["matched"] == "50 MG"


def test_it_does_not_fire_a_regex_again_on_the_next_token():
    policy = build_policy(regex_spec(r"\d+ ?mg"))
    assert policy.evaluate(step("Take 50 mg", 5)) is not None
    assert policy.evaluate(step("Take 50 mg daily", 10)) is None


def test_it_fires_a_growing_regex_match_once_where_it_starts():
    fired = feed([regex_spec(r"\d+")], ["Take", " 1", "2", "0", " mg", " or", " 5"])
    assert positions(fired) == [1, 6]  # "12", "120" start where "1" did: not again
    assert [d.span for _, d in fired] == [(5, 6), (15, 16)]


def test_it_fires_a_regex_at_the_token_that_confirms_its_lookahead():
    fired = feed([regex_spec(r"\d+(?= mg)")], ["Take", "5", " mg", " daily", " 5", " mg"])
    assert positions(fired) == [2, 5]  # "5" ends before " mg" but only " mg" confirms it
    assert [d.span for _, d in fired] == [(4, 5), (15, 16)]
    assert positions(feed([regex_spec(r"\d+(?= mg)")], ["Take", "5 mg"])) == [1]
    assert feed([regex_spec(r"\d+(?= mg)")], ["Take", "5", " ml"]) == []


def test_it_does_not_fire_a_regex_without_a_match():
    assert feed([regex_spec(r"\d+ ?mg")], ["Take ", "rest", "."]) == []


def test_it_rejects_an_invalid_regex():
    with pytest.raises(PolicyConfigError, match=r'Policy "dose".*"pattern".*invalid'):
        build_policy(regex_spec("(unclosed"))


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a*)*", "(.*a){20}", r"((\w+)\s?)+x"])
def test_it_rejects_nested_quantifiers(pattern):
    with pytest.raises(PolicyConfigError, match="backtrack"):
        build_policy(regex_spec(pattern))


def test_it_accepts_ordinary_quantified_groups():
    for pattern in [r"\d+(?:\.\d+)?", "(?:ab)+", r"[(+)]+", r"\(a+\)+", "(ab){2}"]:
        build_policy(regex_spec(pattern))


def test_it_bounds_a_pathological_regex_that_slips_past_the_check():
    policy = build_policy(regex_spec("(a|aa)+$"))  # alternation, no nested quantifier
    text = "a" * 60 + "!"
    started = time.monotonic()
    assert policy.evaluate(step(text, len(text) - 1)) is None
    assert time.monotonic() - started < 1.0


def test_it_rejects_unknown_regex_flags():
    with pytest.raises(PolicyConfigError, match='"flags"'):
        build_policy(regex_spec("a", "q"))


# low confidence, high entropy


def test_it_fires_low_confidence_below_the_threshold_only():
    policy = build_policy(
        {"name": "unsure", "kind": "low_confidence", "params": {"threshold": 0.35}}
    )
    decision = policy.evaluate(before(top1=0.2))
    assert decision is not None and decision.reason == "Top-1 probability 0.20 is below 0.35"
    assert decision.evidence["signals"]["top1_prob"] == 0.2
    assert policy.evaluate(before(top1=0.35)) is None
    assert policy.evaluate(before(top1=0.9)) is None


def test_it_fires_high_entropy_above_the_threshold_only():
    policy = build_policy({"name": "spread", "kind": "high_entropy", "params": {"threshold": 2.0}})
    assert policy.evaluate(before(entropy=2.5)).evidence["entropy"] == 2.5
    assert policy.evaluate(before(entropy=2.0)) is None


def test_it_evaluates_only_the_policies_of_the_current_phase():
    policies = PolicySet.from_specs([{"name": "unsure", "kind": "low_confidence"}])
    assert policies.evaluate(step("x", 0, top1=0.01)) == []
    assert len(policies.evaluate(before(top1=0.01))) == 1


# overconfidence


def test_it_fires_overconfidence_when_confident_after_absolute_wording():
    fired = feed([overconfidence()], ["This ", "will ", "definitely", " work", " well"], top1=0.97)
    assert positions(fired) == [3]  # once "definitely" is known to be a whole word
    assert fired[0][1].span == (10, 20)
    assert fired[0][1].evidence["word"] == "definitely"


def test_it_needs_both_confidence_and_absolute_wording():
    assert feed([overconfidence()], ["This ", "will ", "definitely", " work"], top1=0.5) == []
    assert feed([overconfidence()], ["This ", "will ", "probably", " work"], top1=0.99) == []


def test_it_finds_chinese_absolute_wording():
    fired = feed([overconfidence()], ["这", "绝对", "有效"], top1=0.99)
    assert positions(fired) == [1]


def test_it_does_not_take_uncertainly_for_certainly():
    assert feed([overconfidence()], ["He ", "uncertainly", " agreed"], top1=0.99) == []


def test_it_forgets_absolute_wording_outside_the_window():
    spec = {**overconfidence(), "params": {"window_chars": 20}}
    assert feed([spec], ["certainly " + "x" * 30, " more"], top1=0.99) == []


# sentence count


def test_it_counts_english_and_chinese_sentences():
    chunks = ["Rest", ".", " Drink", " water", "!", " 多", "喝", "水", "。", "好", "吗", "？"]
    fired = feed([sentences()], chunks)
    assert positions(fired) == [2, 5, 8, 11]
    assert [d.evidence["sentence"] for _, d in fired] == [
        "Rest.",
        "Drink water!",
        "多喝水。",
        "好吗？",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "It costs 3.5 dollars",
        "Use e.g. aspirin",
        "Use i.e. the first",
        "Ask Dr. Smith",
        "Mr. and Mrs. Jones",
        "apples vs. pears",
        "apples, etc. and pears",
        "Well... maybe",
        "See example.com today",
        "1. First item",
    ],
)
def test_it_is_not_fooled_by_dots_inside_a_sentence(text):
    assert feed([sentences()], simulated_tokens(text + " ")) == []


def test_it_ends_sentences_at_ascii_punctuation_inside_chinese_text():
    assert positions(feed([sentences()], ["好的", ".", "然后", "呢", "?", "嗯"])) == [2, 5]


def test_it_waits_for_the_space_after_an_english_full_stop():
    fired = feed([sentences()], ["Version", " 3", ".", "5", " is", " out", ".", " Next"])
    assert positions(fired) == [7]


def test_it_counts_etc_at_the_end_of_a_sentence_before_a_capital():
    assert positions(feed([sentences()], ["apples", " etc", ".", " Then"])) == [3]


def test_it_pauses_every_n_sentences_up_to_max_pauses():
    chunks = simulated_tokens("One. Two. Three. Four. Five. Six. Seven. Eight. ")
    assert len(feed([sentences(every=2)], chunks)) == 4
    assert [d.evidence["pause_number"] for _, d in feed([sentences(1, 3)], chunks)] == [1, 2, 3]


def test_it_counts_a_token_ending_with_a_full_stop_and_space():
    assert positions(feed([sentences()], ["Done. ", "Next"])) == [0]


# tool call


def test_it_fires_when_a_json_object_with_action_is_completed():
    chunks = ["Calling ", '{"action"', ': "search", ', '"args": {"q": "a}b"}', "}", " now"]
    fired = feed([tool_call()], chunks)
    assert positions(fired) == [4]
    decision = fired[0][1]
    assert decision.evidence["object"] == {"action": "search", "args": {"q": "a}b"}}
    assert decision.span == (8, len("".join(chunks[:5])))


def test_it_ignores_braces_and_escaped_quotes_inside_json_strings():
    text = 'x {"action": "say", "text": "use \\"}\\" and {"}'
    assert positions(feed([tool_call()], list(text))) == [len(text) - 1]


def test_it_does_not_fire_on_json_without_action():
    assert feed([tool_call()], ['{"tool": ', '{"action": "x"}', "}"]) == []
    assert feed([tool_call()], ['{"name": "search"}']) == []


def test_it_does_not_fire_on_invalid_json_or_prose_braces():
    assert feed([tool_call()], ['{"action": "x",}']) == []
    assert positions(feed([tool_call()], ["sets {a, b", '} and {"action": 1}'])) == [1]


def test_it_uses_a_configured_key():
    spec = {**tool_call(), "params": {"key": "tool"}}
    assert positions(feed([spec], ['{"tool": "calc"}'])) == [0]
