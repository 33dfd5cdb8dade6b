"""Prompts become ids through the chat template, or as plain text for a model without one."""

from __future__ import annotations

import copy

from inference.prompt import encode_prompt


def test_it_wraps_a_message_and_a_system_prompt_in_the_chat_template(tokenizer):
    ids = encode_prompt(tokenizer, "Check the dose.", system="You review notes.")
    text = tokenizer.decode(ids)
    assert text.index("You review notes.") < text.index("Check the dose.")
    assert ids != tokenizer.encode("Check the dose.")


def test_it_falls_back_to_plain_text_without_a_chat_template(tokenizer):
    plain = copy.deepcopy(tokenizer)
    plain.chat_template = None
    ids = encode_prompt(plain, "Check the dose.", system="You review notes.")
    assert plain.decode(ids) == "You review notes.\nCheck the dose."


def test_it_takes_token_ids_as_they_are(tokenizer):
    assert encode_prompt(tokenizer, [5, 6, 7], system="ignored") == [5, 6, 7]
