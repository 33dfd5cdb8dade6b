"""Policy reasons in the reader's language: a template per policy kind."""

import re

from django.utils import translation

from inference.policies import POLICY_KINDS
from reviewer.web.ui_text import reason_templates

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
