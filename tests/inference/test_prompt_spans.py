"""Which prompt tokens spell the user's text (the case a reviewer typed), with the default
model's own tokenizer and chat template: what lets the session page show attention on the
case text's words."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from inference.loader import default_model_dir
from inference.prompt import encode_prompt, user_text_spans

pytestmark = pytest.mark.model

SYSTEM = "You are a clinician. Write the note."


@pytest.fixture(scope="module")
def tokenizer():
    path = default_model_dir()
    if not (path / "tokenizer_config.json").is_file():
        pytest.fail(f"the default model is missing at {path}: run `make model`")
    return AutoTokenizer.from_pretrained(path)


def spans_of(tokenizer, text: str, system: str | None = SYSTEM, built_with: str | None = SYSTEM):
    ids = encode_prompt(tokenizer, text, system=built_with)
    return ids, user_text_spans(tokenizer, ids, text, system=system)


def spelled(text: str, spans) -> str:
    """The text the tokens spell, each character once (pieces of one character share it)."""
    covered = sorted({i for span in spans if span for i in range(*span)})
    assert covered == list(range(covered[0], covered[-1] + 1)), "the spans leave a hole"
    return "".join(text[i] for i in covered)


def test_it_maps_each_token_of_the_case_to_its_characters_and_the_template_to_none(tokenizer):
    text = "58-year-old man with chest pain.\r\nWrite the note.  "
    ids, spans = spans_of(tokenizer, text)
    assert len(spans) == len(ids)
    assert spelled(text, spans) == text
    for token, span in zip(ids, spans, strict=True):
        if span:
            assert tokenizer.decode([token]) == text[span[0] : span[1]]
    # The system prompt and the chat template around the case are not the case.
    mapped = [i for i, span in enumerate(spans) if span]
    assert mapped == list(range(mapped[0], mapped[-1] + 1))
    empty = encode_prompt(tokenizer, "", system=SYSTEM)
    assert len(ids) - len(mapped) == len(empty)
    before = tokenizer.decode(ids[: mapped[0]])
    assert SYSTEM in before and before.rstrip().endswith("user")
    assert "chest" in [text[s[0] : s[1]].strip() for s in spans if s]


def test_the_pieces_of_one_chinese_character_all_point_at_it(tokenizer):
    text = "患者男，58岁，胸痛。"
    ids, spans = spans_of(tokenizer, text)
    assert spelled(text, spans) == text
    chest = text.index("胸")
    pieces = [i for i, span in enumerate(spans) if span == (chest, chest + 1)]
    assert len(pieces) > 1  # one character, several byte-level tokens
    assert tokenizer.decode([ids[i] for i in pieces]) == "胸"


def test_a_line_break_merged_with_the_templates_is_the_cases_own(tokenizer):
    text = "\n\nFever since Monday."
    ids, spans = spans_of(tokenizer, text)
    assert spelled(text, spans) == text
    first = next(i for i, span in enumerate(spans) if span)
    assert spans[first] == (0, 1) and tokenizer.decode([ids[first]]) == "\n\n"


def test_the_case_is_found_after_the_system_prompt_that_holds_the_same_words(tokenizer):
    text = "Write the note."
    ids, spans = spans_of(tokenizer, text)
    mapped = [i for i, span in enumerate(spans) if span]
    assert spelled(text, spans) == text
    assert "user" in tokenizer.decode(ids[: mapped[0]]).split(SYSTEM)[-1]


def test_it_finds_the_case_in_a_prompt_built_with_another_system_prompt(tokenizer):
    text = "Chest pain since this morning."
    ids, spans = spans_of(tokenizer, text, system="A domain prompt changed since.")
    assert spelled(text, spans) == text
    assert tokenizer.decode([ids[i] for i, span in enumerate(spans) if span]) == text


def test_it_maps_nothing_when_the_text_is_not_in_the_prompt(tokenizer):
    ids = encode_prompt(tokenizer, "Fever since Monday.", system=SYSTEM)
    assert user_text_spans(tokenizer, ids, "Chest pain.", system=SYSTEM) == [None] * len(ids)
