"""Prompt -> token ids: the tokenizer's chat template, or plain text where it has none."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inference.text import Tokenizer

# A user message, chat messages ({"role": ..., "content": ...}), or token ids.
Prompt = str | Sequence[Mapping[str, str]] | Sequence[int]


def encode_prompt(tokenizer: Tokenizer, prompt: Prompt, system: str | None = None) -> list[int]:
    """A string (user message), chat messages, or token ids -> prompt ids."""
    # Any: the items arrive from JSON, and the first one tells which of the two lists it is.
    items: list[Any] = (
        [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    )
    if items and isinstance(items[0], int):
        return [int(i) for i in items]
    messages: list[Mapping[str, str]] = items
    if system and not any(m["role"] == "system" for m in messages):
        messages = [{"role": "system", "content": system}, *messages]
    if not getattr(tokenizer, "chat_template", None):
        return tokenizer.encode("\n".join(m["content"] for m in messages))
    encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)
    return list(encoded["input_ids"])
