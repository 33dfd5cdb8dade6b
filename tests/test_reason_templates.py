"""Policy reasons in the reader's language: a template per policy kind."""

import re

from django.utils import translation

from inference.policies import POLICY_KINDS
from reviewer.web.ui_text import filled_reason, reason_templates, shown_number, shown_percent

PLACEHOLDER = re.compile(r"%\((\w+)\)s")
# Evidence keys each kind's decisions carry (inference/policies/), plus what the page's
# script derives: the window's start and end for drift, a tool call's value.
EVIDENCE = {
    "keyword": {"keyword", "matched"},
    "regex": {"pattern", "matched"},
    "low_confidence": {"top1_prob", "threshold"},
    "high_entropy": {"entropy", "threshold"},
    "overconfidence": {"top1_prob", "threshold", "matched", "word"},
    "sentence_count": {"sentences"},
    "tool_call": {"key", "object", "value"},
    "drift": {"mean_entropy", "mean_similarity", "start", "end"},
    "learned": {"score", "threshold", "model_checksum", "features"},
}


def test_it_has_a_chinese_template_for_every_policy_kind_using_only_its_evidence():
    with translation.override("zh-hans"):
        templates = reason_templates()
    assert set(templates) == set(POLICY_KINDS) == set(EVIDENCE)
    for kind, template in templates.items():
        assert re.search("[\u4e00-\u9fff]", template), kind  # translated
        assert set(PLACEHOLDER.findall(template)) <= EVIDENCE[kind], kind


def test_english_pages_fill_the_same_templates_so_numbers_read_alike():
    with translation.override("en"):
        assert set(reason_templates()) == set(POLICY_KINDS)


def test_a_value_and_its_threshold_never_read_alike_when_they_differ():
    with translation.override("en"):
        low = filled_reason("low_confidence", {"top1_prob": 0.097, "threshold": 0.1}, "")
        assert low == "Top-1 probability 9.7% is below 10%"
        entropy = filled_reason("high_entropy", {"entropy": 3.0004, "threshold": 3}, "")
        assert entropy == "Entropy 3.0004 nats is above 3"
        score = filled_reason("learned", {"score": 0.70001, "threshold": 0.7}, "")
        assert "score 0.70001, threshold 0.70" in score


def test_probabilities_read_as_percentages_and_measures_keep_two_decimals():
    with translation.override("en"):
        low = filled_reason("low_confidence", {"top1_prob": 0.0812, "threshold": 0.35}, "")
        assert low == "Top-1 probability 8% is below 35%"
        drift = {"window": [4, 9], "mean_entropy": 2.8123, "mean_similarity": 0.4}
        assert filled_reason("drift", drift, "").endswith("entropy 2.81, similarity to prompt 0.40")


def test_the_chinese_reason_tells_value_and_threshold_apart(compiled_catalogs):
    with translation.override("zh-hans"):
        low = filled_reason("low_confidence", {"top1_prob": 0.097, "threshold": 0.1}, "")
    assert re.search("[\u4e00-\u9fff]", low) and "9.7%" in low and "10%" in low


def test_a_number_shows_two_decimals_and_more_only_where_asked():
    assert shown_number(0.1) == "0.10"
    assert shown_number(0.1, 4) == "0.10"
    assert shown_number(0.09712, 3) == "0.097"
    assert shown_number(3.0) == 3.0 and shown_number(7) == 7 and shown_number("x") == "x"


def test_a_probability_reads_as_the_page_shows_it():
    assert shown_percent(0.0812) == "8%"
    assert shown_percent(0.097, 1) == "9.7%" and shown_percent(0.1, 1) == "10%"
    assert shown_percent(0.001) == "<1%" and shown_percent(0.0) == "0%"
    assert shown_percent(1) == "100%"
    with translation.override("en"):
        close = filled_reason("low_confidence", {"top1_prob": 0.34996, "threshold": 0.35}, "")
        assert close == "Top-1 probability 34.996% is below 35%"
        certain = {"top1_prob": 0.991, "threshold": 0.95, "matched": "always"}
        assert filled_reason("overconfidence", certain, "").startswith(
            "Top-1 probability 99% above 95%"
        )
