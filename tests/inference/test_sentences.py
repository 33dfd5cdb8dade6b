"""Sentence ends in growing text: settled once, at one offset, however the text grows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.sentences import SentenceTracker, complete_sentences


def sentence_texts(text: str) -> list[str]:
    return [text[s.start : s.end] for s in complete_sentences(text)]


def test_it_splits_english_and_chinese_sentences():
    text = "Rest. Drink water! Why? 多喝水。好吗？OK"
    assert sentence_texts(text) == ["Rest.", "Drink water!", "Why?", "多喝水。", "好吗？"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It costs 3.5 dollars. Next", ["It costs 3.5 dollars."]),
        ("Use e.g. aspirin, i.e. a drug. Then", ["Use e.g. aspirin, i.e. a drug."]),
        ("Dr. Smith and Mr. Jones left. Then", ["Dr. Smith and Mr. Jones left."]),
        ("apples etc. and pears. Then", ["apples etc. and pears."]),
        ("apples etc. Then", ["apples etc."]),
        ("Well... maybe. So", ["Well... maybe."]),
        ("Wait… Then", ["Wait…"]),
        ('He said "Go." Then', ['He said "Go."']),
        ("The U.S. economy grew. Then", ["The U.S. economy grew."]),
        ("1. First item\n2. Second item. ", ["1. First item\n2. Second item."]),
        ("See example.com now", []),
        ("Unfinished.", []),
    ],
)
def test_it_is_not_fooled_by_dots_that_do_not_end_a_sentence(text, expected):
    assert sentence_texts(text) == expected


def test_it_confirms_an_english_sentence_at_the_space_after_it():
    (sentence,) = complete_sentences("Done. ")
    assert (sentence.end, sentence.confirmed_at) == (5, 5)


def test_it_confirms_a_chinese_sentence_at_its_terminator():
    (sentence,) = complete_sentences("好。")
    assert sentence.confirmed_at == 1


def test_it_waits_for_the_next_word_after_an_ambiguous_stop():
    assert complete_sentences("apples etc. ") == []
    assert complete_sentences("apples etc.  The")[0].confirmed_at == 13


SAMPLES = [
    "Dr. ",
    "Smith",
    " said",
    " 3.5",
    ".",
    " ",
    "etc",
    "...",
    " Then",
    "好",
    "。",
    "!",
    "\n",
    "e.g.",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(SAMPLES), max_size=30))
def test_it_tracks_growing_text_exactly_like_a_full_scan(chunks):
    tracker = SentenceTracker()
    text = ""
    for chunk in chunks:
        text += chunk
        assert tracker.complete_sentences(text) == complete_sentences(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(SAMPLES), max_size=30))
def test_it_never_changes_its_mind_about_a_prefix(chunks):
    text = "".join(chunks)
    full = complete_sentences(text)
    for cut in range(len(text) + 1):
        assert complete_sentences(text[:cut]) == [s for s in full if s.confirmed_at < cut]


def test_it_rescans_after_the_text_is_edited():
    tracker = SentenceTracker()
    assert len(tracker.complete_sentences("One. Two. ")) == 2
    assert len(tracker.complete_sentences("One! ")) == 1
