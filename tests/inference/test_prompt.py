"""Prompts become ids through the chat template, or as plain text for a model without one."""

from __future__ import annotations

import copy

import pytest

from inference.prompt import PromptRefused, encode_prompt

USER_FIRST = (  # as some models' templates do: a refusal raised from the template itself
    "{% if messages[0]['role'] != 'user' %}{{ raise_exception('A user turn comes first') }}"
    "{% endif %}{% for m in messages %}{{ m['content'] }}{% endfor %}"
)


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


def test_it_encodes_a_conversation_of_system_messages_alone_as_a_turn_to_answer(tokenizer):
    """The gateway takes a conversation without a user message, as OpenAI does: the model
    answers after the system message, and the domain's own prompt does not replace it."""
    system_only = [{"role": "system", "content": "Summarise: fever since Monday."}]
    ids = encode_prompt(tokenizer, system_only, system="You review notes.")
    text = tokenizer.decode(ids)
    assert "Summarise: fever since Monday." in text and "You review notes." not in text
    turn_to_answer = tokenizer.decode(encode_prompt(tokenizer, "Go.")).split("Go.")[-1].strip()
    assert turn_to_answer and text.rstrip().endswith(turn_to_answer)


def test_it_refuses_messages_the_models_chat_template_refuses(tokenizer):
    strict = copy.deepcopy(tokenizer)
    strict.chat_template = USER_FIRST
    with pytest.raises(PromptRefused, match="A user turn comes first"):
        encode_prompt(strict, [{"role": "system", "content": "Summarise: fever."}])
    assert encode_prompt(strict, [{"role": "user", "content": "Go."}])  # what it takes
