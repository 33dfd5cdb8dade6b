"""Which alternatives at a pause get a look-ahead preview: the top ones, and any other that is
only part of a character, which a reviewer could not tell from another such without it."""

from __future__ import annotations

from reviewer.worker.runtime import LOOKAHEAD_BRANCHES, preview_candidates


def alternatives(*texts: str) -> list[dict]:
    return [
        {"token_id": 100 + i, "text": text, "prob": 0.5 / (i + 1)} for i, text in enumerate(texts)
    ]


def test_it_previews_the_top_alternatives():
    assert LOOKAHEAD_BRANCHES == 3
    assert preview_candidates(alternatives(" fever", " cough", " pain", " rash", " chills")) == [
        100,
        101,
        102,
    ]


def test_it_also_previews_every_alternative_that_is_part_of_a_character():
    # 保 and 险 begin with bytes that decode to nothing alone: "\ufffd", or "" where stored so.
    shown = preview_candidates(alternatives("岁", "，", "。", "\ufffd", "的", ""))
    assert shown == [100, 101, 102, 103, 105]


def test_it_previews_nothing_without_alternatives():
    assert preview_candidates([]) == []
